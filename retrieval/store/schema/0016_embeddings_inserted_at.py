"""When each vector row reached the engine, by the engine's clock: how a process's vector mirror learns of the
rows other processes wrote (retrieval/index/ `sync`)."""

STATEMENTS = [
    # MATERIALIZED, never written by a client: a copied row (INSERT ... SELECT *, a retirement) gets its own time,
    # and `SELECT *` leaves it out. Rows stored before this migration get the epoch (added with that expression and
    # materialized, then the expression becomes now64), so no old row reads as new. The minmax index lets a
    # mirror's delta read skip every part older than what it has seen.
    """
    ALTER TABLE memory_embeddings
        ADD COLUMN IF NOT EXISTS inserted_at DateTime64(6, 'UTC') MATERIALIZED toDateTime64(0, 6, 'UTC')
    """,
    "ALTER TABLE memory_embeddings MATERIALIZE COLUMN inserted_at SETTINGS mutations_sync = 2",
    "ALTER TABLE memory_embeddings MODIFY COLUMN inserted_at DateTime64(6, 'UTC') MATERIALIZED now64(6, 'UTC')",
    """
    ALTER TABLE memory_embeddings
        ADD INDEX IF NOT EXISTS inserted_at_minmax inserted_at TYPE minmax GRANULARITY 1
    """,
    "ALTER TABLE memory_embeddings MATERIALIZE INDEX inserted_at_minmax SETTINGS mutations_sync = 2",
]
