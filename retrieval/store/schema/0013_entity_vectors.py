"""Entity summaries and their vectors: what the entity leg reads to find an entity named in other words
(retrieval/ingest/entities.py writes them)."""

STATEMENTS = [
    # One live summary per (org, namespace, entity); the entity lowercased, as entity_mentions holds it. A rewrite
    # is a new version, a delete a version with status 'deleted' (ReplacingMergeTree on version; reads use FINAL:
    # a namespace holds one row per entity).
    """
    CREATE TABLE IF NOT EXISTS entity_summaries (
        org String,
        namespace String,
        entity String,
        version UInt64,
        status LowCardinality(String),
        name String COMMENT 'the entity as written',
        summary String,
        sensitivity LowCardinality(String),
        actor String,
        updated_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(version)
    ORDER BY (org, namespace, entity)
    """,
    # Each summary's vector per embedding model ("<name>: <summary>" embedded): the model is in the key, so after a
    # model change the old vectors go unread. `version` is the summary's: a vector of an older version is unread.
    """
    CREATE TABLE IF NOT EXISTS entity_vectors (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        entity String,
        version UInt64,
        vector Array(Float32) CODEC(NONE)
    ) ENGINE = ReplacingMergeTree(version)
    ORDER BY (org, namespace, embedding_model, entity)
    """,
]
