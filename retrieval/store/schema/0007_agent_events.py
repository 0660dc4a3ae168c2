"""Cost accounting: one row per op that reached a model provider."""

STATEMENTS = [
    # ORDER BY (org, created_at): an org's spend over a period is one range read.
    # TTL 400 days: a year of billing history and a margin.
    """
    CREATE TABLE IF NOT EXISTS agent_events (
        org String,
        namespace String,
        op LowCardinality(String),
        actor String,
        created_at DateTime64(3, 'UTC'),
        upstream_cost_usd Float64,
        embedding_tokens UInt64,
        input_tokens UInt64,
        output_tokens UInt64,
        llm_calls UInt32,
        embedding_calls UInt32,
        model LowCardinality(String) COMMENT 'the model that cost the most in this op'
    ) ENGINE = MergeTree
    ORDER BY (org, created_at)
    TTL toDateTime(created_at) + INTERVAL 400 DAY
    """,
]
