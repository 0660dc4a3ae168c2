"""The rerank calls an op made (Cohere's API, an operator's endpoint), beside its LLM and embedding calls."""

STATEMENTS = [
    """
    ALTER TABLE agent_events ADD COLUMN IF NOT EXISTS rerank_calls UInt32 DEFAULT 0
        COMMENT 'calls to a rerank API or endpoint (builtin:openai''s are LLM calls)'
    """,
]
