"""The conflict resolver's decisions (retrieval/ingest/conflict_resolver.py): after a write whose row got a
conflict verdict, a model judged the two rows a revision, a contradiction or compatible, and said why.

Append-only, one row per side a decision marks (a contradiction marks both rows). ORDER BY the tenant, then the
row and its version: a search asks which of its served versions stand contradicted, a memory's history reads its
decisions. No TTL: a decision is the record of why a row was superseded or marked.
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS conflict_decisions (
        org String,
        namespace String,
        memory_key String,
        agent String,
        session_id String,
        version UInt64 COMMENT 'the version of memory_key the decision is about',
        other_key String COMMENT 'the row it was judged against',
        other_version UInt64,
        decision LowCardinality(String) COMMENT 'revision | contradiction | compatible',
        reason String COMMENT 'the model''s stated reason',
        model String,
        decided_at DateTime64(3, 'UTC')
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, memory_key, version)
    """,
]
