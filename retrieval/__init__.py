"""Memory retrieval over ClickHouse, in layers; a layer imports only those below it (pyproject's import-linter
contract, run by `make test`):

    search     memory.search / ask: plan, legs, fusion, rank, window, verdict, result
    ingest     memory.set / delete: gates, sensitivity, embedding, background re-embeds
    gates      the similarity gates: calibrated per embedder, raised by a namespace's noise
    providers  model calls: embedders, LLMs, the org switch, metering, costs
    store      ClickHouse: the one execution path, schema, row identity, vector mirror, reads
    language   text alone: terms, query shape, names, sentences, chunks
    errors, options, knobs, caching, metrics, cores    shared by all

See docs/architecture.md for a request's path through them.
"""
