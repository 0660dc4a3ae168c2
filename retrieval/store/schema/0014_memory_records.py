"""Typed records: a type and named fields, what the records leg matches and memory.ask can answer from
(retrieval/ingest/records.py writes them)."""

STATEMENTS = [
    # One live record per (org, namespace, record_key); a rewrite is a new version, a delete a version with status
    # 'deleted' (ReplacingMergeTree on version; reads use FINAL). `terms`: the stemmed words of the type, the key,
    # the field names and values, which the records leg matches a question's words against.
    """
    CREATE TABLE IF NOT EXISTS memory_records (
        org String,
        namespace String,
        record_key String,
        version UInt64,
        status LowCardinality(String),
        record_type LowCardinality(String),
        fields Map(String, String),
        terms Array(String),
        sensitivity LowCardinality(String),
        actor String,
        updated_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(version)
    ORDER BY (org, namespace, record_key)
    """,
]
