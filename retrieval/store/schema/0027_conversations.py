"""Conversations: a fact extracted from turns names them (`source_keys`), and deferred extraction waits in
`extraction_queue` (memory.set_from_messages, retrieval/ingest/conversation.py).

The queue: one row per job, its newest revision the job's state (ReplacingMergeTree(revision), read with FINAL).
ORDER BY the tenant, then the job: a worker asks for the due jobs of every tenant (a small table: jobs end), a
search counts its scope's pending ones. No TTL: a job that keeps failing stays visible with its error until an
operator retries or drops it; a done job is kept as the record of what was extracted when.
"""

STATEMENTS = [
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS source_keys Array(String) DEFAULT [] "
    "COMMENT 'an extracted fact: the keys of the turns it came from'",
    """
    CREATE TABLE IF NOT EXISTS extraction_queue (
        org String,
        namespace String,
        job_id String,
        revision UInt64 COMMENT 'bumped at each change of state',
        state LowCardinality(String) COMMENT 'pending | done | failed',
        session_id String,
        turn_keys Array(String) COMMENT 'the stored turns to extract from, in order',
        agent String,
        user_id String,
        run_id String,
        enqueued_by String COMMENT 'the token subject that wrote the turns: whose the model call is',
        attempts UInt16,
        due_at DateTime64(3, 'UTC') COMMENT 'not tried again before (backoff)',
        error String COMMENT 'the last failure, for the operator',
        facts UInt32 COMMENT 'facts stored, once done',
        created_at DateTime64(3, 'UTC'),
        updated_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, job_id)
    """,
]
