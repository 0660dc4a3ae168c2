"""Session digests: one paragraph per session saying what it covered (retrieval/ingest/digests.py writes them,
the digest leg reads them)."""

STATEMENTS = [
    # One live digest per (org, namespace, session_id): a rewrite is a new version, a delete a version with status
    # 'deleted'; ReplacingMergeTree on version keeps the newest, and reads use FINAL (a namespace holds one digest
    # per session: a few hundred rows, where the merge costs nothing). The vector of a digest whose org's model
    # calls were off is empty (embedding_dim 0) until embed_pending fills it.
    """
    CREATE TABLE IF NOT EXISTS session_summaries (
        org String,
        namespace String,
        session_id String,
        version UInt64,
        status LowCardinality(String),
        agent String COMMENT 'the writer',
        user_id String COMMENT 'whose session: read_scope own_user reads only its own',
        summary String,
        session_date Nullable(DateTime64(3, 'UTC')) COMMENT 'when the session took place',
        sensitivity LowCardinality(String),
        embedding_model LowCardinality(String),
        embedding_dim UInt16,
        vector Array(Float32) CODEC(NONE),
        actor String,
        created_at DateTime64(3, 'UTC'),
        updated_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(version)
    ORDER BY (org, namespace, session_id)
    """,
]
