"""Batch memory.set throughput, fake embedder: through the service layer and over HTTP.

    .venv/bin/python bench/ingest.py [--memories 20000] [--batch 500] [--runs 3]
    .venv/bin/python bench/ingest.py --grow 1000000 [--marks 10000 100000 1000000] [--distinct] [--no-mirror]

`--grow N` instead writes N memories into one namespace through the service layer (write gates on, the vector mirror
serving them) and reports the rate of the ten batches before each mark: whether ingest slows as the namespace grows,
and what the mirrors weigh then; and the whole grow's rate, which the engine's merges swing less. Its baseline,
timed at each mark: the same ten batches as bare inserts. Its values are a batch's worth of LoCoMo turns cycled with
a running number, so at a million rows each has ~2,000 near copies stored (every row passes the duplicate gate and
has its markers compared, and a text's copies pile into one of the gates' cells); with `--distinct` each value is
instead two turns, a pair no other row has: distinct memories, as a namespace's are. With `--no-mirror`
(LOOM_VECTOR_MIRROR off, as a namespace past even its compact mirror's bytes has none) the gates read the namespace's
stored cells (retrieval/index/stored_cells.py), trained in the background once a batch is too large to scan
(LOOM_WRITE_GATES_MAX_PAIRS): the batches before they are ready wait for them (LOOM_WRITE_GATES_LOAD_WAIT_S), or are
stored unjudged (the `judged` column, and the whole grow's count).

Values are LoCoMo dialogue turns (../shared/data/locomo-dev) cycled under fresh
keys. The baseline, timed in the same run, is a bare insert of the same rows into
`memories` alone: what storage costs with no embedding, terms, chunks or checks.
Each figure is the median of --runs runs into a fresh namespace.
"""

import argparse
import datetime
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from scratch_django import ROOT, django_on_scratch

django_on_scratch("loom-bench-")

from django.conf import settings

from retrieval import index
from retrieval.ingest import write
from retrieval.store import clickhouse, schema
from retrieval.store.rows import next_version
from tenancy.access import Scope
from tenancy.roles import Role
from tests.scratch import scratch_dir

DATA = ROOT.parent / "shared" / "data" / "locomo-dev" / "memories.jsonl"


@functools.cache
def texts() -> list[str]:
    if DATA.exists():
        return [json.loads(line)["text"] for line in DATA.open()]
    # Said, since short synthetic texts make a third of the postings: their rates compare with no LoCoMo run's.
    print(f"no {DATA}: synthetic values, not comparable with runs on LoCoMo turns", file=sys.stderr)
    return [f"Synthetic memory number {i}: the user mentioned a preference for option {i % 17}." for i in range(1500)]


def items(count: int, run: int) -> list[dict]:
    corpus = texts()
    return [
        {
            "memory_key": f"bench.{run}.{i}",
            "value": corpus[i % len(corpus)],
            "tags": ["bench"],
            "session_id": f"s{i % 40}",
        }
        for i in range(count)
    ]


def service_layer(batches: list[list[dict]], namespace: str) -> float:
    scope = Scope(org="bench", namespace=namespace, role=Role.WRITER, subject="bench")
    start = time.perf_counter()
    for batch in batches:
        write.set_memories(scope, [write.MemoryInput(**item) for item in batch])
    return time.perf_counter() - start


def bare_insert(batches: list[list[dict]], namespace: str) -> float:
    """The floor: the same rows into `memories` only, no embedding, terms or checks."""
    start = time.perf_counter()
    for batch in batches:
        version = next_version()
        now = datetime.datetime.now(datetime.UTC)
        rows = [
            {
                "org": "bench",
                "namespace": namespace,
                "memory_key": item["memory_key"],
                "agent": "default",
                "session_id": item["session_id"],
                "version": version,
                "revision": version,
                "status": "active",
                "value": item["value"],
                "memory_type": "fact",
                "tags": item["tags"],
                "confidence": 1.0,
                "source_class": "asserted",
                "sensitivity": "low",
                "created_at": now,
                "updated_at": now,
            }
            for item in batch
        ]
        clickhouse.insert("memories", rows)
    return time.perf_counter() - start


class HttpServer:
    """`make run`'s server (gunicorn, one process, threads) on a free port with its own var/ dir."""

    def __init__(self):
        from tests.chserver import free_port

        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "DJANGO_"))}
        env["LOOM_VAR_DIR"] = scratch_dir("loom-bench-http-")
        python = sys.executable

        def manage(*args: str) -> str:
            return subprocess.run(
                [python, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
            ).stdout

        manage("migrate", "--noinput")
        manage("loom_org", "create", "bench")
        self.token = manage("loom_token", "create", "--org", "bench", "--role", "writer").strip().splitlines()[-1]
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                str(Path(python).parent / "gunicorn"),
                "loom_site.wsgi:application",
                "--config",
                "python:loom_site.serving",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
                "--threads",
                "8",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/health", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the HTTP server did not start")

    def post(self, op: str, body: dict):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/{op}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            assert answer.status in (200, 201), answer.status

    def run(self, batches: list[list[dict]], namespace: str) -> float:
        start = time.perf_counter()
        for batch in batches:
            self.post("memory.set", {"namespace": namespace, "items": batch})
        return time.perf_counter() - start

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def distinct_value(at: int) -> str:
    """The `at`th row's two turns, a pair no other row has in either order (for ~n²/2 rows, n turns): the turns
    `at % n` and the one `1 + at // n` after it, which stays under half the turns away."""
    corpus = texts()
    first = at % len(corpus)
    return f"{corpus[first]} {corpus[(first + 1 + at // len(corpus)) % len(corpus)]}"


def grow(total: int, marks: list[int], size: int, distinct: bool) -> None:
    """One namespace grown to `total`; the rate of the ten batches before each mark, and the bare insert's."""
    scope = Scope(org="bench", namespace="grown", role=Role.WRITER, subject="bench")
    values = "distinct values (two turns each)" if distinct else "turns cycled with a number"
    gates = "the stored cells" if not settings.LOOM_VECTOR_MIRROR else "the vector mirror"
    print(
        f"memory.set into one growing namespace, batches of {size}, fake embedder, write gates on ({gates}), "
        f"embedded; {values}"
    )
    # CPU a batch: the writing thread's, and the whole process's (the engine's inserts and merges, the mirror's
    # background passes): on 2 cores, a window whose engine works more runs the writing thread slower too.
    print(
        f"{'rows':>9}{'memories/s':>12}{'judged':>8}{'bare /s':>10}{'x bare':>8}{'mirror MB':>11}"
        f"{'thread CPU ms':>15}{'process CPU ms':>16}"
    )
    window, rows, started, unjudged = 10 * size, 0, None, 0
    began, aside = time.perf_counter(), 0.0  # aside: the marks' baselines, left out of the whole grow's rate
    for at in range(0, total, size):
        if at + window in marks:
            started, thread_cpu, process_cpu = time.perf_counter(), time.thread_time(), time.process_time()
        batch = items(size, 0)
        for i, item in enumerate(batch):
            item["memory_key"] = f"grown.{at + i}"
            item["value"] = distinct_value(at + i) if distinct else f"{item['value']} (#{at + i})"
        results = write.set_memories(scope, [write.MemoryInput(**item) for item in batch])
        unjudged += sum(result.write_gates == "skipped" for result in results)
        rows = at + size
        if rows in marks and started is not None:
            rate = window / (time.perf_counter() - started)
            thread_cpu = 1000 * (time.thread_time() - thread_cpu) / (window // size)
            process_cpu = 1000 * (time.process_time() - process_cpu) / (window // size)
            judged = sum(result.write_gates == "judged" for result in results)
            timed = time.perf_counter()
            bare = window / bare_insert([batch] * 10, f"bare-{rows}")
            aside += time.perf_counter() - timed
            held = index.held_bytes() / 2**20
            print(
                f"{rows:>9,}{rate:>12,.0f}{judged:>8}{bare:>10,.0f}{bare / rate:>8.1f}{held:>11,.0f}"
                f"{thread_cpu:>15,.0f}{process_cpu:>16,.0f}",
                flush=True,
            )
            started = None
    # Ten batches swing with the engine's merges; the whole grow does not.
    elapsed = time.perf_counter() - began - aside
    print(
        f"the whole grow: {total:,} memories in {elapsed:,.0f} s, {total / elapsed:,.0f}/s; {unjudged:,} stored unjudged"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--grow", type=int, help="grow one namespace to this many memories instead")
    parser.add_argument("--marks", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--distinct", action="store_true", help="--grow: each value a pair of turns no other row has")
    parser.add_argument("--no-mirror", action="store_true", help="--grow: the gates read the stored cells")
    args = parser.parse_args()
    schema.apply()
    if args.no_mirror:
        settings.LOOM_VECTOR_MIRROR = False
    if args.grow:
        grow(args.grow, [mark for mark in args.marks if mark <= args.grow], args.batch, args.distinct)
        return
    server = HttpServer()
    timings = {"bare insert (baseline)": [], "service layer": [], "HTTP": []}
    try:
        for run in range(args.runs):
            rows = items(args.memories, run)
            batches = [rows[i : i + args.batch] for i in range(0, len(rows), args.batch)]
            timings["bare insert (baseline)"].append(bare_insert(batches, f"bare-{run}"))
            timings["service layer"].append(service_layer(batches, f"service-{run}"))
            timings["HTTP"].append(server.run(batches, f"http-{run}"))
    finally:
        server.stop()
    baseline = statistics.median(timings["bare insert (baseline)"])
    print(
        f"memory.set, {args.memories} memories in batches of {args.batch}, fake embedder, "
        f"embedded ClickHouse, median of {args.runs} runs"
    )
    print(f"{'path':<24}{'median s':>10}{'memories/s':>13}{'x baseline':>12}")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:<24}{median:>10.2f}{args.memories / median:>13.0f}{median / baseline:>12.1f}")


if __name__ == "__main__":
    main()
