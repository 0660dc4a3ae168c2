"""Derived facts: the amounts a memory's value states (money, hours, distances, weights), read deterministically at
write time (retrieval/language/amounts.py), which computed evidence adds up for a `sum` question.

ORDER BY the row version's identity and the amount's place in its value: a sum reads the facts of the rows it
found by that identity. A version's facts never change (a new value is a new version), so rows are only ever
added; a retired version's facts stay, unread, as its `memories` row does. No TTL: they live as long as the row.
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS derived_facts (
        org String,
        namespace String,
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        position UInt16 COMMENT 'the amount''s place among those its value states',
        value Float64 COMMENT 'in the canonical unit',
        unit LowCardinality(String) COMMENT 'USD, EUR, GBP, JPY, hour, km, mile, kg or lb',
        said String COMMENT 'the words it was read from',
        dated_at DateTime64(3, 'UTC') COMMENT 'coalesce(valid_at, created_at) of the row'
    ) ENGINE = ReplacingMergeTree
    ORDER BY (org, namespace, memory_key, agent, session_id, version, position)
    """,
]
