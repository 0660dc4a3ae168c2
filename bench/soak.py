"""Soak: mixed reads and writes from several clients against `make run` for a bounded time; then every acknowledged
write must be readable and searchable.

    .venv/bin/python bench/soak.py [--clients 8] [--minutes 2] [--write-every 3] [--config embedded|server:N]

The load is bench/http_load.py's (the served app, LoCoMo turns preloaded, `fast` searches of LoCoMo questions, every
`--write-every`th request a write of a fresh key), held longer. At the end each acknowledged write is read back
(memory.bulk_get) and searched for by its own words (a lexical search, top 10, through any worker): a write that
is stored but not indexed, or indexed late, counts as unsearchable. Reported: requests, errors by status, latency
p50/p95/p99 (ms), writes acknowledged, lost (not readable) and unsearchable.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_load import Connection, Served, load, note, preload
from locomo import corpus

from tests.chserver import Server
from tests.scratch import scratch_dir


def unsearchable(served: Served, questions: list[str], keys: list[str]) -> list[str]:
    """The acknowledged writes a lexical search of their own words does not rank in its top 10."""
    missed = []
    with Connection(served.url, served.headers, timeout=60) as connection:
        for key in keys:
            body = {"query": note(key, questions), "search_mode": "lexical", "top_k": 10, "min_similarity": 0}
            hits = connection.call("/v1/memory.search", body)[1].get("hits", [])
            if key not in [hit["memory_key"] for hit in hits]:
                missed.append(key)
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=2)
    parser.add_argument("--write-every", type=int, default=3)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--config", default="embedded", help="embedded, or server:N (N workers on a server)")
    args = parser.parse_args()
    turns, questions = corpus()
    backend, _, workers = args.config.partition(":")
    server = Server(scratch_dir("loom-bench-soak-ch-")) if backend == "server" else None
    served = Served(int(workers or 1), server.url if server else None)
    try:
        preload(served, turns, args.memories)
        result = load(served, questions, args.clients, args.minutes * 60, args.write_every)
        missed = unsearchable(served, questions, result["keys"])
    finally:
        served.stop()
        if server:
            server.stop()
    cuts = statistics.quantiles(result["latencies"], n=100)
    errors = {status: result["errors"].count(status) for status in sorted(set(result["errors"]))}
    print(
        f"soak: {args.config}, {args.clients} clients, {args.minutes:g} min, 1 write in {args.write_every}, "
        f"{args.memories} memories preloaded"
    )
    print(
        f"{'requests':>9} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'errors':>7} {'writes':>7} {'lost':>5} "
        f"{'unsearchable':>13}"
    )
    print(
        f"{len(result['latencies']):>9} {result['rps']:>7.1f} {cuts[49]:>7.1f} {cuts[94]:>7.1f} {cuts[98]:>7.1f} "
        f"{len(result['errors']):>7} {result['writes']:>7} {result['missing']:>5} {len(missed):>13}"
    )
    if errors:
        print(f"errors by status: {errors}")
    if missed:
        print(f"unsearchable, first ten: {missed[:10]}")


if __name__ == "__main__":
    main()
