"""memory.search and what is built on it. `service.search()` is the one entry point; one module per stage:
`plan` (a frozen Plan) -> `legs` -> `pool` -> `fallback` (LLM legs after a weak pass) -> `fusion` -> `rank` ->
`rerank` -> `window` -> `abstain` -> `evidence` (counts, date differences) -> `result`, with `mentions` (the
entity check), `spelling`, `reach`, `key_axis`, `paging`, `trace`, `usage` beside them and `ask` on top. May
import every layer below."""
