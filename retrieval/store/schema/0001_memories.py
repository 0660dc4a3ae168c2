"""The memory tables: rows and their versions, vectors, chunks, lexical terms, namespaces.

A memory row is identified by (org, namespace, memory_key, agent, session_id):
one row per key per writer per session. Each write of a new value adds a
`version`; the previous version is re-inserted with status `superseded`
under a higher `revision`, and ReplacingMergeTree(revision) keeps the
newest revision of each version. Reads use FINAL. Status is carried onto
every side table (vectors, chunks, terms) so each leg filters on its own
rows without a join.
"""

STATEMENTS = [
    # ORDER BY: every read is tenant-scoped (org, namespace), then gathers one
    # key's rows and their versions together for memory.get and supersede.
    # Small granules and compressed blocks: reads here are by key (get, bulk_get,
    # a search's served window), so a lookup reads and decompresses 256 rows, not
    # 8192 (a 10-row hydrate at 100k rows: 27 -> 18 ms). No TTL: memories live until deleted.
    """
    CREATE TABLE IF NOT EXISTS memories (
        org String,
        namespace String,
        memory_key String,
        agent String COMMENT 'the writer',
        session_id String,
        version UInt64 COMMENT 'when this value was written, ns since epoch',
        revision UInt64 COMMENT 'bumped when this version changes status',
        status LowCardinality(String) COMMENT 'active | superseded | deleted',
        superseded_by UInt64 DEFAULT 0 COMMENT 'version that replaced this one',
        value String,
        memory_type LowCardinality(String),
        tags Array(String),
        category String,
        entities Array(String),
        triples Array(Array(String)) COMMENT '(subject, relation, object) each',
        confidence Float32,
        source_class LowCardinality(String),
        sensitivity LowCardinality(String),
        pinned Bool,
        valid_at Nullable(DateTime64(3, 'UTC')),
        user_id String,
        run_id String,
        actor String COMMENT 'the token subject that wrote this version',
        embedding_model LowCardinality(String) COMMENT 'empty when not embedded (high sensitivity)',
        chunk_count UInt16,
        created_at DateTime64(3, 'UTC') COMMENT 'first write of this row',
        updated_at DateTime64(3, 'UTC') COMMENT 'write of this version'
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, memory_key, agent, session_id, version)
    SETTINGS index_granularity = 256, min_compress_block_size = 4096, max_compress_block_size = 16384
    """,
    # ORDER BY puts embedding_model right after the tenant: search reads only
    # the live model's vectors, so rows of another model are skipped by the
    # primary key. CODEC(NONE) on the vectors: they do not compress, and LZ4
    # made the scan ~4x slower on these machines. embedding_dim = 0 marks a stub
    # awaiting the embedder. The row's filter and rank columns ride along, so a
    # search ranks its pool without reading `memories`.
    """
    CREATE TABLE IF NOT EXISTS memory_embeddings (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        revision UInt64,
        status LowCardinality(String),
        memory_type LowCardinality(String),
        tags Array(String),
        category String,
        entities Array(String),
        user_id String,
        run_id String,
        source_class LowCardinality(String),
        confidence Float32,
        sensitivity LowCardinality(String),
        dated_at DateTime64(3, 'UTC') COMMENT 'coalesce(valid_at, created_at): what the temporal leg windows on',
        embedding_dim UInt16,
        value_vector Array(Float32) CODEC(NONE),
        key_vector Array(Float32) CODEC(NONE),
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, embedding_model, memory_key, agent, session_id, version)
    """,
    # A long value's passages, each embedded; a chunk hit folds onto its parent row.
    """
    CREATE TABLE IF NOT EXISTS memory_chunks (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        chunk_index UInt16,
        revision UInt64,
        status LowCardinality(String),
        start_char UInt32,
        text String,
        embedding_dim UInt16,
        vector Array(Float32) CODEC(NONE),
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, embedding_model, memory_key, agent, session_id, version, chunk_index)
    """,
    # Postings: one row per stemmed term per field of a row version. ORDER BY
    # puts the term right after the tenant so a query's terms read a few
    # granules; granules of 1024 keep a rare term's read small.
    """
    CREATE TABLE IF NOT EXISTS memory_terms (
        org String,
        namespace String,
        field Enum8('value' = 1, 'key' = 2),
        term String,
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        revision UInt64,
        status LowCardinality(String),
        tf UInt16,
        doc_len UInt32
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace, field, term, memory_key, agent, session_id, version)
    SETTINGS index_granularity = 1024
    """,
    # BM25's corpus statistics per namespace and field, as signed deltas
    # (documents, total length). Readers sum(), so a write counts at once, before
    # any merge (the "live tail"). A term's document frequency needs no table of
    # its own: BM25 reads the term's postings anyway, and counts them there.
    """
    CREATE TABLE IF NOT EXISTS corpus_stats (
        org String,
        namespace String,
        field Enum8('value' = 1, 'key' = 2),
        docs Int64,
        total_len Int64
    ) ENGINE = SummingMergeTree
    ORDER BY (org, namespace, field)
    """,
    # Every change to the lexical index enters here: one row per row version and
    # field, its stemmed terms as arrays. The Null engine keeps nothing; the views
    # below fan each row out into postings and corpus statistics inside ClickHouse.
    # `sign`: +1 a version entering the index, -1 leaving it, 0 a status change
    # of a version already out of it (a superseded version being deleted).
    """
    CREATE TABLE IF NOT EXISTS term_input (
        org String,
        namespace String,
        field Enum8('value' = 1, 'key' = 2),
        memory_key String,
        agent String,
        session_id String,
        version UInt64,
        revision UInt64,
        status LowCardinality(String),
        sign Int8,
        terms Array(String),
        tfs Array(UInt16),
        doc_len UInt32
    ) ENGINE = Null
    """,
    """
    CREATE MATERIALIZED VIEW IF NOT EXISTS term_postings_mv TO memory_terms AS
    SELECT org, namespace, field, term, memory_key, agent, session_id, version, revision, status, tf, doc_len
    FROM term_input ARRAY JOIN terms AS term, tfs AS tf
    """,
    """
    CREATE MATERIALIZED VIEW IF NOT EXISTS corpus_stats_mv TO corpus_stats AS
    SELECT org, namespace, field, toInt64(sign) AS docs, toInt64(sign) * doc_len AS total_len
    FROM term_input
    WHERE sign != 0
    """,
    # A namespace's registered configuration; the newest revision wins.
    """
    CREATE TABLE IF NOT EXISTS namespaces (
        org String,
        namespace String,
        retrieval_defaults String COMMENT 'JSON, validated by namespace.register',
        text_capture Bool COMMENT 'consent to store query text in search_trace_log',
        rerank_endpoint String,
        description String,
        revision UInt64,
        updated_by String,
        updated_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(revision)
    ORDER BY (org, namespace)
    """,
]
