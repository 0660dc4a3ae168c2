"""The named options of a search, as the spec names them."""

SEARCH_MODES = ("semantic", "rrf", "hybrid", "bm25_hybrid", "lexical", "graph", "temporal", "related")
RECIPES = ("fast", "balanced", "quality", "verbatim", "code", "temporal", "graph")
BUDGETS = ("fast", "standard", "deep")
BODIES = ("full", "excerpt", "none", "unit", "source")
FLOOR_MODES = ("readmit", "ids_only", "drop")
