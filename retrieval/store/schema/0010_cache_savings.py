"""What answers served from the LLM response cache saved, per op (the spec's out_llm_cache_saved_usd)."""

STATEMENTS = [
    """
    ALTER TABLE agent_events ADD COLUMN IF NOT EXISTS llm_cache_saved_usd Float64 DEFAULT 0
        COMMENT 'what the op''s cached answers would have cost upstream (estimated from their length)'
    """,
]
