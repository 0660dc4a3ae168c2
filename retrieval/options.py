"""The named options of a search, as the spec names them."""

SEARCH_MODES = ("semantic", "rrf", "hybrid", "bm25_hybrid", "lexical", "graph", "temporal", "related")
# Each recipe, and the fields it fills when the request left them unset.
RECIPES = {
    "fast": {"search_mode": "semantic", "hyde": False, "unmatched": False, "retrieval_budget": "fast"},
    "balanced": {"search_mode": "rrf", "hyde": False},
    "quality": {"search_mode": "bm25_hybrid", "hyde": True, "extra_candidates": 50},
    "verbatim": {"search_mode": "lexical", "alpha": 0.85},
    "code": {"search_mode": "bm25_hybrid", "alpha": 0.75},
    "temporal": {"search_mode": "temporal"},
    "graph": {"search_mode": "graph"},
}
BUDGETS = ("fast", "standard", "deep")
BODIES = ("full", "excerpt", "none", "unit", "source")
FLOOR_MODES = ("readmit", "ids_only", "drop")
