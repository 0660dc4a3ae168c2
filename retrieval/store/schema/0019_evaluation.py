"""Evaluation: labelled question sets, runs of them under configurations, and each question's result
(retrieval/evaluation/)."""

STATEMENTS = [
    # Append-only: an upload is a new version of the set, never an edit, so a run always names the questions it
    # asked. ORDER BY (org, namespace, set_name, version, position): a run reads one version in its order.
    """
    CREATE TABLE IF NOT EXISTS eval_questions (
        org String,
        namespace String,
        set_name String,
        version UInt32 COMMENT 'the upload: 1, 2, ... per (org, namespace, set_name)',
        position UInt32 COMMENT 'the question''s place in the upload, from 0',
        question_id String,
        question String,
        gold_keys Array(String) COMMENT 'the memory keys that answer it',
        should_abstain Bool COMMENT 'memory does not hold the answer: a good search abstains',
        category String,
        answer String COMMENT 'a reference answer, when the set has one',
        uploaded_at DateTime64(3, 'UTC'),
        uploaded_by String
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, set_name, version, position)
    """,
    # One row per state of a run (running, then done or failed); the newest state wins (ReplacingMergeTree on
    # updated_at, read with FINAL). run_id starts with the start time, so ORDER BY run_id lists runs in time order.
    """
    CREATE TABLE IF NOT EXISTS eval_runs (
        org String,
        namespace String,
        run_id String COMMENT 'yyyymmddThhmmssffffff-<hex>: sorts by start time',
        set_name String,
        set_version UInt32,
        configs String COMMENT 'the configurations, as JSON: [{name, search fields}]',
        total UInt32 COMMENT 'questions x configurations',
        status LowCardinality(String) COMMENT 'running, done or failed',
        error String,
        started_from LowCardinality(String) COMMENT 'api, lab, cli or schedule',
        started_by String,
        started_at DateTime64(3, 'UTC'),
        updated_at DateTime64(3, 'UTC'),
        summary String COMMENT 'once done: each configuration''s metrics with their intervals, as JSON'
    ) ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (org, namespace, run_id)
    """,
    # One row per question per configuration, written as the run goes (its count is the run's progress).
    """
    CREATE TABLE IF NOT EXISTS eval_results (
        org String,
        namespace String,
        run_id String,
        config String,
        position UInt32,
        served_keys Array(String) COMMENT 'the hits, in rank order',
        abstain Bool,
        abstain_code String,
        latency_ms Float64,
        cost_usd Float64 COMMENT 'what the search spent on model calls',
        error String COMMENT 'the refusal, when the search itself failed'
    ) ENGINE = MergeTree
    ORDER BY (org, namespace, run_id, config, position)
    """,
]
