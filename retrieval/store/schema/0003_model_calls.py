"""The per-org model-call switch: every change kept, so the audit trail is the table itself."""

STATEMENTS = [
    # One row per change; the switch in force is the org's newest row. ORDER BY
    # (org, changed_at) reads one org's history in order; no TTL: an audit trail.
    """
    CREATE TABLE IF NOT EXISTS org_model_calls (
        org String,
        enabled Bool,
        reason String,
        actor String COMMENT 'the token subject or user that flipped it',
        changed_at DateTime64(6, 'UTC')
    ) ENGINE = MergeTree
    ORDER BY (org, changed_at)
    """,
]
