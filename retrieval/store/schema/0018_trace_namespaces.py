"""Which namespaces each logged search read: a search fanned out over several (namespace_scope all_mine) is
logged under the one it addressed, and only a reader granted all of them may see its keys
(retrieval/search/trace.py). Rows logged before it read as the addressed namespace alone."""

STATEMENTS = [
    "ALTER TABLE search_trace_log ADD COLUMN IF NOT EXISTS namespaces_searched Array(String) DEFAULT []",
]
