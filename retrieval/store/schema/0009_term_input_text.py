"""term_input carries a version's terms as one space-separated string, split inside ClickHouse.

Encoding half a million short strings of term arrays cost a write batch more
than any statement did; one string per row costs a twelfth. Terms are `\\w+`
stems and key parts, so they never hold whitespace. `tfs` widens to UInt32 and
the view clamps it, so the writer no longer does it tf by tf. term_input keeps
nothing (Null engine): dropping it loses no data.
"""

STATEMENTS = [
    "DROP VIEW IF EXISTS term_postings_mv",
    "DROP VIEW IF EXISTS corpus_stats_mv",
    "DROP TABLE IF EXISTS term_input",
    """
    CREATE TABLE term_input (
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
        terms String COMMENT 'the stemmed terms, space-separated, in the order of tfs',
        tfs Array(UInt32),
        doc_len UInt32
    ) ENGINE = Null
    """,
    """
    CREATE MATERIALIZED VIEW term_postings_mv TO memory_terms AS
    SELECT org, namespace, field, term, memory_key, agent, session_id, version, revision, status,
           toUInt16(least(tf, 65535)) AS tf, doc_len
    FROM term_input ARRAY JOIN splitByWhitespace(terms) AS term, tfs AS tf
    """,
    """
    CREATE MATERIALIZED VIEW corpus_stats_mv TO corpus_stats AS
    SELECT org, namespace, field, toInt64(sign) AS docs, toInt64(sign) * doc_len AS total_len
    FROM term_input
    WHERE sign != 0
    """,
]
