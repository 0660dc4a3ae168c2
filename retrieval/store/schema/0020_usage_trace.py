"""Which search an outcome rates: memory.outcome's trace_id, so a rated search labels a question for evaluation
whether or not it ran within a run (retrieval/search/trace.py `rated`)."""

STATEMENTS = [
    "ALTER TABLE memory_usage ADD COLUMN IF NOT EXISTS trace_id String DEFAULT ''",
]
