"""memory.search and what is built on it. `service.search()` is the one entry point; one module per stage:
`plan` (a frozen Plan) -> `legs` -> `pool` -> `fusion` -> `rank` -> `rerank` -> `window` -> `abstain` ->
`result`, with `mentions` (the entity check), `spelling`, `fallback` (LLM legs after a weak pass), `reach`, `key_axis`, `paging`, `trace`,
`usage` beside them and `ask` on top. May import every layer below."""
