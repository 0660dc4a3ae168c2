"""The write gates' verdicts: a duplicate names its canonical row; a conflict carries its verdict."""

STATEMENTS = [
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS duplicate_of String DEFAULT '' "
    "COMMENT 'the key of the live row this value duplicates (hidden from search unless include_duplicates)'",
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS conflict_verdict String DEFAULT '' "
    "COMMENT 'JSON: the live row this value conflicts with, and the cosine'",
    # On the vector row too, so search hides duplicates as it scans.
    "ALTER TABLE memory_embeddings ADD COLUMN IF NOT EXISTS duplicate_of String DEFAULT ''",
]
