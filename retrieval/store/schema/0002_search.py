"""What search reads beyond the rows themselves: entities, the graph, use, the trace log, parked pages.

The entity tables carry the row identity, status and revision like the other
side tables, so a superseded or deleted row leaves the entity and graph legs
with its vectors.
"""

_ROW = """
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        revision UInt64,
        status LowCardinality(String),
"""

STATEMENTS = [
    # One row per (row version, entity), entities lowercased. ORDER BY puts the
    # entity right after the tenant: the entity leg and the query's entity
    # detection look entities up by name.
    f"""
    CREATE TABLE IF NOT EXISTS entity_mentions (
        org String,
        namespace String,
        entity String,
        {_ROW}
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, entity, memory_key, agent, session_id, version)
    """,
    # Directed edges between entities, both directions stored: from a row's
    # triples (relation named) and from entities mentioned together on a row
    # (relation 'co_mention'). The graph leg walks one hop from the query's entities.
    f"""
    CREATE TABLE IF NOT EXISTS entity_edges (
        org String,
        namespace String,
        src String,
        dst String,
        relation String,
        {_ROW}
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, src, dst, relation, memory_key, agent, session_id, version)
    """,
    # (subject, relation, object) triples a write declared; relation stems are
    # matched against the query's stems.
    f"""
    CREATE TABLE IF NOT EXISTS entity_triples (
        org String,
        namespace String,
        subject String,
        relation String,
        object String,
        relation_terms Array(String),
        {_ROW}
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, subject, relation, object, memory_key, agent, session_id, version)
    """,
    # Use of a memory (memory.outcome): positive and harm events feeding the
    # reinforcement term. Append-only; read with a decay at query time. No TTL:
    # a half-life of 90 days makes a year-old event worth 6%, and it still counts.
    """
    CREATE TABLE IF NOT EXISTS memory_usage (
        org String,
        namespace String,
        memory_key String,
        event LowCardinality(String) COMMENT 'positive | harm',
        weight Float32,
        run_id String,
        actor String,
        created_at DateTime64(3, 'UTC')
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, memory_key, created_at)
    """,
    # One row per search when LOOM_SEARCH_TRACE_LOG_ENABLED. ORDER BY time within
    # the namespace: the log is read newest first. TTL 180 days, as the spec keeps it.
    """
    CREATE TABLE IF NOT EXISTS search_trace_log (
        org String,
        namespace String,
        created_at DateTime64(3, 'UTC'),
        trace_id String,
        op LowCardinality(String),
        caller String,
        run_id String,
        query String COMMENT 'empty unless the namespace consents to text capture',
        query_captured Bool,
        search_mode LowCardinality(String),
        top_k UInt16,
        keys Array(String),
        scores Array(Float32),
        similarities Array(Float32),
        abstain Bool,
        abstain_code LowCardinality(String),
        retrieval_risk LowCardinality(String),
        retrieval_confidence Float32,
        candidates_total UInt32,
        degraded Array(String),
        latency_ms Float32,
        stage_ms Map(String, Float32)
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, created_at, trace_id)
    TTL toDateTime(created_at) + INTERVAL 180 DAY
    """,
    # A paged search's parked pool; a handle names it until the TTL drops it.
    """
    CREATE TABLE IF NOT EXISTS search_pages (
        org String,
        namespace String,
        handle String,
        created_at DateTime64(3, 'UTC'),
        expires_at DateTime64(3, 'UTC'),
        payload String COMMENT 'JSON: the request and the ranked pool beyond the served window'
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, handle)
    TTL toDateTime(expires_at) + INTERVAL 1 HOUR
    """,
]
