"""Completions cached per org and model, so one org is never served another's answer."""

STATEMENTS = [
    # key = sha256(org, model, system, user, max_tokens, response_format). window_keys names
    # the memory keys whose text the prompt carried, so erasing a memory can delete them.
    # TTL 7 days (the spec's): answers age with the memories they quote.
    """
    CREATE TABLE IF NOT EXISTS llm_response_cache (
        key String,
        org String,
        model LowCardinality(String),
        text String,
        window_keys Array(String),
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(created_at)
    ORDER BY key
    TTL toDateTime(created_at) + INTERVAL 7 DAY
    """,
]
