"""Stored cells: the write gates' inverted file kept in ClickHouse, for a namespace no vector mirror holds here (past
even its compact mirror's bytes, LOOM_VECTOR_MIRROR off, or a restart's load not in yet): a batch reads the few
cells nearest its values by primary key instead of being stored unjudged (retrieval/index/stored_cells.py).

`vector_centroids`: a training of a namespace's cells (a version, `trained_at`) as rows, one per state it reached:
`training` (the claim, rewritten as it moves on, so that two processes never both train and an abandoned training
is seen as one), `filling` (its centroids, while the rows are indexed) and `ready`. ORDER BY the tenant and version:
a process lists a namespace's versions with one key's few rows. No TTL: a version is dropped once a newer one is
ready.

`vector_cells`: each live row's cell under a version, its write scope and its value vector's int8 codes. ORDER BY
the tenant, version and cell: a batch's read is a few primary-key ranges of the cells its values probe. A row is
written once by the write that stores it (or the backfill that indexes rows written before the centroids):
ReplacingMergeTree folds the two copies a write racing the backfill can make. Retired rows stay until a new version
replaces them all: a reader checks each candidate against memory_embeddings, the truth of what is live.
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS vector_centroids (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        trained_at DateTime64(6, 'UTC') COMMENT 'the version: its vector_cells rows carry it',
        state LowCardinality(String) COMMENT 'training (the claim), filling (the centroids) or ready',
        updated_at DateTime64(6, 'UTC') COMMENT 'the last change: a training that stops moving is abandoned',
        dim UInt16,
        coarse Array(Float32) CODEC(NONE),
        fine Array(Float32) CODEC(NONE),
        starts Array(UInt32) COMMENT 'coarse cell c owns the fine centroids starts[c]..starts[c + 1] - 1',
        fit_floor Float32 COMMENT 'a row fitting its centroid worse is a stray, in the last cell',
        rows UInt64 COMMENT 'the live rows it was trained for: trained again once they doubled'
    ) ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (org, namespace, embedding_model, trained_at, state)
    """,
    """
    CREATE TABLE IF NOT EXISTS vector_cells (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        trained_at DateTime64(6, 'UTC'),
        cell UInt32,
        memory_key String,
        agent String,
        user_id String,
        session_id String,
        run_id String,
        memory_type LowCardinality(String),
        version UInt64,
        codes Array(Int8) CODEC(NONE) COMMENT 'the value vector / scale, rounded',
        scale Float32
    ) ENGINE = ReplacingMergeTree
    ORDER BY (org, namespace, embedding_model, trained_at, cell, memory_key, agent, session_id, version)
    """,
]
