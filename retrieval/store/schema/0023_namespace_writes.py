"""How many rows each namespace's tables have taken: a search on a ClickHouse server asks for its namespaces' counts
in one statement, and reads what other processes wrote only once a count moved (LOOM_CHANGE_MARKER=engine:
retrieval/store/change_marker.py). Before, every search asked the engine what changed in two statements (the vector
rows since its last read, the side tables and the configuration): 12-13 ms of a 17 ms search at 100k rows on this
box, most of it the engine's cost of a statement over a namespace's rows.

Views count, so no write path has to: every insert into a table whose rows a process keeps copies of (the vector
rows, the side tables, the configurations) adds its row count here, retirements and copies by INSERT ... SELECT too;
the vector rows apart from the rest, so that a memory write sends the next search to the delta read alone.
SummingMergeTree: merges add the counts up, and a reader sums whatever parts there are, so a count only grows and
a write is in it once its insert returns. ORDER BY the tenant: a search reads one key's few rows (and, on a
cluster, the shard that holds the namespace's rows, where its views fire). No TTL: a count is a few bytes a
namespace.
"""

# The tables whose changes a search learns of before reading its in-process copies of them, each counted in the
# column of the read it sends a search to: the vector mirror's delta read, or the side-table and configuration check
# (a memory write, the common one, stores vector rows only).
_VECTORS, _SIDE = "count() AS vector_rows, 0 AS side_rows", "0 AS vector_rows, count() AS side_rows"
_COUNTED = {
    "memory_embeddings": _VECTORS,
    "session_summaries": _SIDE,
    "entity_summaries": _SIDE,
    "memory_records": _SIDE,
    "namespaces": _SIDE,
}

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS namespace_writes (
        org String,
        namespace String,
        vector_rows UInt64 COMMENT 'rows inserted into memory_embeddings, summed',
        side_rows UInt64 COMMENT 'rows inserted into the side tables and namespaces, summed'
    ) ENGINE = SummingMergeTree
    ORDER BY (org, namespace)
    """,
    *(
        f"""
        CREATE MATERIALIZED VIEW IF NOT EXISTS namespace_writes_from_{table} TO namespace_writes AS
        SELECT org, namespace, {counts} FROM {table} GROUP BY org, namespace
        """
        for table, counts in _COUNTED.items()
    ),
]
