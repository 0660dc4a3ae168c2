"""A namespace's noise level: how high off-topic questions score against its own rows (retrieval/gates/noise.py)."""

STATEMENTS = [
    # One row per measurement; the newest (per org, namespace, model) is in force. ReplacingMergeTree on
    # measured_at keeps the table to one row per namespace and model once merged.
    """
    CREATE TABLE IF NOT EXISTS namespace_noise (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        rows UInt64 COMMENT 'the live rows the probes were scored against',
        tops Array(Float32) COMMENT 'each off-topic probe''s best cosine against those rows',
        level Float64 COMMENT 'the 90th percentile of tops',
        abstain Float64 COMMENT 'level + 0.07: the namespace''s abstain gate',
        measured_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(measured_at)
    ORDER BY (org, namespace, embedding_model)
    """,
]
