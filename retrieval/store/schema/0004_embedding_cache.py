"""Query embeddings shared between processes (and replicas of a ClickHouse server)."""

STATEMENTS = [
    # key = sha256(org, model, normalised text): one org's entries are never another's.
    # ORDER BY key: a lookup is a point read. TTL: a vector is cheap to make again,
    # and a model's answer for the same text does not change, so a week is plenty.
    """
    CREATE TABLE IF NOT EXISTS embedding_cache (
        key String,
        model LowCardinality(String),
        vector Array(Float32) CODEC(NONE),
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(created_at)
    ORDER BY key
    TTL toDateTime(created_at) + INTERVAL 7 DAY
    """,
]
