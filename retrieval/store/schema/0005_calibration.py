"""Calibrations: the gates derived from an embedder's own cosine distribution, per model and per namespace."""

_CALIBRATION = """
        min_similarity Float64 COMMENT 'the noise floor',
        abstain Float64,
        query_rewrite Float64,
        hyde_fallback Float64,
        rerank_skip Float64,
        conflict Float64,
        duplicate Float64,
        calibration_hash String,
        paraphrase Array(Float32) COMMENT 'the probe cosines the gates came from',
        question_fact Array(Float32),
        distractor Array(Float32),
        source LowCardinality(String) COMMENT 'boot | recalibrate | calibration.run',
        created_at DateTime64(3, 'UTC')
"""

STATEMENTS = [
    # One live row per embedder model (the newest); older rows stay as history for drift.
    # ORDER BY (embedding_model, created_at): a replica reads its model's newest row.
    f"""
    CREATE TABLE IF NOT EXISTS embedder_calibration (
        embedding_model LowCardinality(String),
        {_CALIBRATION}
    ) ENGINE = MergeTree
    ORDER BY (embedding_model, created_at)
    """,
    # A namespace's own calibration (calibration.run over its labelled pairs) overrides the model's.
    f"""
    CREATE TABLE IF NOT EXISTS namespace_calibration_result (
        org String,
        namespace String,
        embedding_model LowCardinality(String),
        {_CALIBRATION}
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, embedding_model, created_at)
    """,
]
