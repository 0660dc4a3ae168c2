"""The entity extractor's jobs share the extraction queue: a row written without entities, where a real model is
configured, waits there for the model to name what it is about (retrieval/ingest/entity_extractor.py). `task` tells
the jobs apart; the rows a job reads stay in `turn_keys` (for an `entities` job: the memories' keys), and an
`entities` job names the versions it was queued for (a row that moved on since is left to its own)."""

STATEMENTS = [
    "ALTER TABLE extraction_queue ADD COLUMN IF NOT EXISTS task LowCardinality(String) DEFAULT 'facts' "
    "COMMENT 'facts: a conversation''s extraction | entities: the entity extractor''s'",
    "ALTER TABLE extraction_queue ADD COLUMN IF NOT EXISTS versions Array(UInt64) DEFAULT [] "
    "COMMENT 'an entities job: the versions of turn_keys it was queued for'",
]
