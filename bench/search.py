"""memory.search latency at 10k and 100k memories in one namespace, against a numpy exact scan.

    .venv/bin/python bench/search.py [--sizes 10000 100000] [--queries 60] [--budget fast] [--rerank]
                                     [--backend embedded|server] [--mode hybrid]

Values are LoCoMo dialogue turns (../shared/data/locomo-dev) cycled with a
running number, written through the service layer (fake embedder, 384-d);
queries are the LoCoMo questions. Each search runs the `fast` budget through
`service.search()`, the path REST and the Lab call, timed on a second pass so
every query's embedding is cached (the target's terms). The baseline, timed in the
same run on the same vectors: numpy `X @ q` and an argpartition top-k over a
float32 matrix already in memory; and the same searches with the vector mirror
off (`scan`: ClickHouse's exact scan in SQL; with `--mode hybrid`, make run's default, the lexical legs too
read ClickHouse's postings there, and the mirror's own in the `search` columns). Reported: median (p50) and p95 per
search, and the p50 ratio to numpy. `--backend server` runs it all against a
ClickHouse HTTP server on loopback (tests/chserver.py), the production path (its `search` columns with the default
LOOM_CHANGE_MARKER=engine: a search reads its namespace's write count, and what changed once it moved), and times the
searches once more with LOOM_CHANGE_MARKER=host (`marked`: no statement asking what other processes wrote, unless a write on this
host stamped the namespace since; retrieval/store/change_marker.py). `--rerank` also times each search with
`rerank: "builtin:cohere"` against an instant Cohere-speaking reranker on
127.0.0.1 (tests/model_server.py): what the rerank step itself costs (the widened
pool, reading its head's text, the round trip), not a reranker's own latency.
"""

import argparse
import statistics
import time

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-search-")

import numpy as np
from django.conf import settings
from locomo import corpus
from numpy_threads import numpy_default_threads

from retrieval import index
from retrieval.ingest import write
from retrieval.providers.embedders import get_embedder
from retrieval.search import service
from retrieval.search.plan import SearchRequest
from retrieval.store import clickhouse, schema
from tenancy.access import Scope
from tenancy.roles import Role
from tests.scratch import scratch_dir


def load(scope: Scope, size: int, turns: list[str]) -> None:
    for start in range(0, size, 500):
        batch = [
            write.MemoryInput(memory_key=f"m{i}", value=f"{turns[i % len(turns)]} (#{i})")
            for i in range(start, min(start + 500, size))
        ]
        write.set_memories(scope, batch)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def numpy_baseline(scope: Scope, questions: list[str], top_k: int) -> list[float]:
    rows = clickhouse.query_decoded(  # as numpy arrays: a million rows as Python floats took ~20 GB here
        "SELECT value_vector FROM memory_embeddings FINAL WHERE org = {org:String} AND namespace = {ns:String}",
        {"org": scope.org, "ns": scope.namespace},
    )
    matrix = np.stack([row[0] for row in rows]).astype(np.float32, copy=False)
    del rows
    embedder = get_embedder().inner  # the model itself: the baseline makes no org's call
    timings = []
    for question in questions:
        q = embedder.embed(question)
        with numpy_default_threads():
            start = time.perf_counter()
            scores = matrix @ q
            best = np.argpartition(-scores, top_k)[:top_k]
            best[np.argsort(-scores[best])]
            timings.append((time.perf_counter() - start) * 1000)
    return timings


def searches(scope: Scope, questions: list[str], asked: dict, rerank: str | None = None) -> tuple[list[float], dict]:
    """Each question searched with the request fields `asked` (budget, top_k, mode): ms per search, median stages."""
    timings, stages = [], {}
    for question in questions:
        start = time.perf_counter()
        request = SearchRequest(query=question, rerank=rerank, **asked)
        result = service.search(scope, request)
        timings.append((time.perf_counter() - start) * 1000)
        for stage, ms in result.stage_ms.items():
            stages.setdefault(stage, []).append(ms)
    return timings, {stage: statistics.median(values) for stage, values in stages.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--budget", default="fast", choices=["fast", "standard", "deep"])
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument(
        "--mode", choices=["semantic", "hybrid", "bm25_hybrid"], help="the search mode (default: the spec's, semantic)"
    )
    parser.add_argument("--rerank", action="store_true", help="also time searches through a loopback reranker")
    parser.add_argument("--backend", default="embedded", choices=["embedded", "server"])
    parser.add_argument(
        "--load-ungated",
        action="store_true",
        help="write the rows without the write gates (only the setup: 1M rows through them take most of an hour here)",
    )
    args = parser.parse_args()
    if args.backend == "server":
        from tests.chserver import Server

        server = Server(scratch_dir("loom-bench-chserver-"))
        clickhouse.use(server.url)
    schema.apply()
    if args.rerank:
        from tests.model_server import ModelServer

        reranker = ModelServer().start()
        settings.COHERE_API_KEY, settings.LOOM_COHERE_BASE_URL = "bench", reranker.url.removesuffix("/v1")
    turns, questions = corpus()
    questions = questions[: args.queries]
    asked = {"retrieval_budget": args.budget, "top_k": args.top_k, "search_mode": args.mode}
    print(
        f"memory.search, budget {args.budget}, top_k {args.top_k}, mode {args.mode or settings.LOOM_MEMORY_SEARCH_DEFAULT_MODE}, "
        f"{len(questions)} queries, fake embedder "
        f"(384-d), {args.backend} ClickHouse; ms per search"
    )
    print(
        f"{'memories':>9} {'search p50':>11} {'search p95':>11} {'scan p50':>9} {'numpy p50':>10} {'numpy p95':>10} "
        f"{'p50 ratio':>10}" + (f" {'marked p50':>11} {'marked p95':>11}" if args.backend == "server" else "")
    )
    stage_report = []
    for size in args.sizes:
        scope = Scope(org="bench", namespace=f"size-{size}", role=Role.ADMIN, subject="bench")
        gates, settings.LOOM_WRITE_GATES = (
            settings.LOOM_WRITE_GATES,
            settings.LOOM_WRITE_GATES and not args.load_ungated,
        )
        load(scope, size, turns)
        settings.LOOM_WRITE_GATES = gates
        searches(scope, questions, asked)  # every query's embedding cached, as the target says
        while index.enabled() and not index.loaded(scope.org, scope.namespace, get_embedder().model_name):
            time.sleep(0.05)  # the first search started the mirror's load; measure once it is in
        found, stages = searches(scope, questions, asked)
        stage_report.append((size, stages))
        marked = []
        if args.backend == "server":
            settings.LOOM_CHANGE_MARKER = "host"
            searches(scope, questions[:1], asked)  # the first asks: nothing asked since the load
            marked, marked_stages = searches(scope, questions, asked)
            settings.LOOM_CHANGE_MARKER = "engine"
            stage_report.append((f"{size}, marked", marked_stages))
        settings.LOOM_VECTOR_MIRROR = False
        scanned, _ = searches(scope, questions, asked)
        settings.LOOM_VECTOR_MIRROR = True
        base = numpy_baseline(scope, questions, args.top_k)
        p50, base50 = percentile(found, 50), percentile(base, 50)
        print(
            f"{size:>9} {p50:>11.1f} {percentile(found, 95):>11.1f} {percentile(scanned, 50):>9.1f} {base50:>10.2f} "
            f"{percentile(base, 95):>10.2f} {p50 / base50:>10.1f}"
            + (f" {percentile(marked, 50):>11.1f} {percentile(marked, 95):>11.1f}" if marked else "")
        )
        if args.rerank:
            reranked, rerank_stages = searches(scope, questions, asked, "builtin:cohere")
            print(
                f"{'':>9} reranked: p50 {percentile(reranked, 50):.1f} p95 {percentile(reranked, 95):.1f} "
                f"({percentile(reranked, 50) / p50:.1f}x the search; rerank step {rerank_stages.get('rerank', 0):.1f})"
            )
    for size, stages in stage_report:
        print(f"stages at {size} (median ms): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    if args.backend == "server":
        server.stop()


if __name__ == "__main__":
    main()
