"""The audit log: who changed an org's settings or access, when, and from where (retrieval/store/audit.py)."""

STATEMENTS = [
    # Append-only: a plain MergeTree that no statement of the service updates or deletes. ORDER BY (org, at): an
    # org's admins read their org's newest entries first. No TTL: an operator decides how long to keep them.
    """
    CREATE TABLE IF NOT EXISTS audit_log (
        org String,
        at DateTime64(3, 'UTC'),
        actor String COMMENT 'the token subject (token:<prefix>), human:<user> (the Lab) or cli:<os user>',
        action LowCardinality(String) COMMENT 'org.set_model_calls, namespace.register, calibration.run, ...',
        target String COMMENT 'the namespace, or the token, the action was on (empty: the org)',
        detail String COMMENT 'what was set, as JSON',
        origin String COMMENT 'http:<client address> or process:<pid>'
    ) ENGINE = MergeTree
    ORDER BY (org, at)
    """,
]
