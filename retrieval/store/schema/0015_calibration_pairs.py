"""A namespace's labelled calibration pairs, kept so the recalibration worker can probe them again."""

STATEMENTS = [
    # The pairs of a namespace's newest calibration.run (ReplacingMergeTree on created_at: one live set per
    # namespace; reads use FINAL). ORDER BY (org, namespace): the worker reads every namespace's set in one scan.
    """
    CREATE TABLE IF NOT EXISTS namespace_calibration_pairs (
        org String,
        namespace String,
        similar Array(Array(String)) COMMENT 'a question and the fact that answers it, each [a, b]',
        distractors Array(Array(String)) COMMENT 'pairs on unrelated subjects, each [a, b]',
        paraphrases Array(Array(String)) COMMENT 'two wordings of one fact (may be empty), each [a, b]',
        created_at DateTime64(3, 'UTC')
    ) ENGINE = ReplacingMergeTree(created_at)
    ORDER BY (org, namespace)
    """,
]
