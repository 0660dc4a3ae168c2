"""The first write after a start, into a namespace of N memories: whether its write gates judge it.

    .venv/bin/python bench/first_write.py [--sizes 10000 100000 200000] [--batch 500] [--stored]

A start leaves every namespace's vector mirror to load again, and a write batch too large to scan in ClickHouse
(over LOOM_WRITE_GATES_MAX_PAIRS) has only the mirror to judge it. For each size one process writes N distinct
memories (two LoCoMo turns each, gates off: the setup) and exits; then a fresh process, the start, writes one batch
(half of it copies of stored values under new keys, half new values), timed, and counts what its gates said and the
copies they caught; then, its mirror in, a second batch alike: the baseline, timed in the same process. The start is
run three times on the same stored rows: with LOOM_WRITE_GATES_LOAD_WAIT_S at its default (the batch waits for the
load), at 0 (never waits: the code before it), and warmed: the process first loads the mirrors of the namespaces
written last, as a serving process does at its start (`index.warm`, loom_site/wsgi.py), timed, and the batch
comes once that is done. With `--stored`, the start comes instead after a process that served the namespace with its
mirror in: a namespace of knobs.STORED_CELLS_FROM rows keeps its gates' cells in ClickHouse
(retrieval/index/stored_cells.py), trained in the background after that process's batch (timed, the `warm-up s`);
the start's first batch (LOOM_WRITE_GATES_LOAD_WAIT_S 0: no wait for the load) reads them. Embedded engine, fake
embedder.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def distinct_value(at: int, corpus: list[str]) -> str:
    """A pair of turns no other row has (as bench/ingest.py's --distinct)."""
    first = at % len(corpus)
    return f"{corpus[first]} {corpus[(first + 1 + at // len(corpus)) % len(corpus)]}"


def child(phase: str, size: int, batch: int, label: str) -> dict:
    """One phase in a process of its own on the kept var/ (LOOM_VAR_DIR): the embedded engine is one process's."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
    import django

    django.setup()
    from django.conf import settings
    from locomo import corpus

    from retrieval import index
    from retrieval.index import stored_training
    from retrieval.ingest import write
    from retrieval.providers.embedders import get_embedder
    from retrieval.search import key_axis
    from retrieval.store import schema
    from tenancy.access import Scope
    from tenancy.roles import Role

    turns = corpus()[0]
    scope = Scope(org="bench", namespace=f"size-{size}", role=Role.ADMIN, subject="bench")
    if phase == "setup":
        schema.apply()
        settings.LOOM_WRITE_GATES = False
        for start in range(0, size, 1000):
            write.set_memories(
                scope,
                [
                    write.MemoryInput(memory_key=f"m{i}", value=distinct_value(i, turns))
                    for i in range(start, min(start + 1000, size))
                ],
            )
        return {}

    def one_batch(name: str) -> dict:
        copies = range(0, size, max(1, size // (batch // 2)))[: batch // 2]  # stored rows, spread over the namespace
        items = [
            write.MemoryInput(memory_key=f"{label}.{name}.copy{i}", value=distinct_value(i, turns)) for i in copies
        ]
        items += [
            write.MemoryInput(memory_key=f"{label}.{name}.new{i}", value=distinct_value(size * 3 + i, turns))
            for i in range(batch - len(items))
        ]
        started = time.perf_counter()
        results = write.set_memories(scope, items)
        return {
            "ms": (time.perf_counter() - started) * 1000,
            "judged": sum(r.write_gates == "judged" for r in results),
            "copies": len(copies),
            "caught": sum(r.duplicate_of is not None for r in results[: len(copies)]),
        }

    def loaded() -> None:
        deadline = time.monotonic() + 600
        while not index.loaded(scope.org, scope.namespace, get_embedder().model_name):
            if time.monotonic() > deadline:
                raise SystemExit(f"the mirror of {size:,} rows did not load within 600 s")
            time.sleep(0.05)

    started = time.perf_counter()
    if phase == "warmed":
        index.warm(get_embedder().model_name, key_axis.enabled)
    if phase == "kept":  # a process serving the namespace: its mirror in, a batch, the stored cells trained
        index.get(scope.org, scope.namespace, get_embedder().model_name)
        loaded()
        started = time.perf_counter()
        one_batch("kept")
        while stored_training.training():
            time.sleep(0.05)
        return {"warm_s": time.perf_counter() - started}
    warmed_s = time.perf_counter() - started
    first = one_batch("first")
    loaded()
    later = one_batch("later")
    while stored_training.training():  # one the first batch began: not left half done at the exit
        time.sleep(0.05)
    return {"warm_s": warmed_s if phase == "warmed" else None, "first": first, "later": later}


def run(phase: str, size: int, batch: int, var: str, label: str = "", wait: str | None = None) -> dict:
    env = {**os.environ, "LOOM_VAR_DIR": var, "LOOM_EMBEDDING_MODEL": "fake-ngram-384"}
    if wait is not None:
        env["LOOM_WRITE_GATES_LOAD_WAIT_S"] = wait
    answer = subprocess.run(
        [sys.executable, __file__, "--child", phase, str(size), str(batch), label],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(answer.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 200000])
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--stored", action="store_true", help="the start after the stored cells were kept")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        phase, size, batch, label = args.child
        print(json.dumps(child(phase, int(size), int(batch), label)))
        return
    from loom_site import settings as loom  # (the default the starts run with)
    from tests.scratch import scratch_dir

    starts = (
        "after a process kept the stored cells (warm-up: its batch to their training's end), with no wait for the load"
        if args.stored
        else f"LOOM_WRITE_GATES_LOAD_WAIT_S {loom.LOOM_WRITE_GATES_LOAD_WAIT_S:g} s against 0, and after a warm start "
        "(the mirror loaded before the batch)"
    )
    print(
        f"the first memory.set batch ({args.batch}: half copies of stored values) after a start, embedded, fake "
        f"embedder; {starts}"
    )
    print(
        f"{'memories':>9} {'start':>7} {'warm-up s':>9} {'first ms':>9} {'judged':>7} {'copies caught':>14} "
        f"{'later ms':>9} {'judged':>7} {'copies caught':>14}"
    )
    for size in args.sizes:
        var = scratch_dir("loom-bench-first-write-")
        run("setup", size, args.batch, var)
        phases = (("start", "waits", None), ("start", "nowait", "0"), ("warmed", "warmed", None))
        if args.stored:
            phases = (("kept", "kept", None), ("start", "stored", "0"))
        for phase, label, wait in phases:
            found = run(phase, size, args.batch, var, label, wait)
            if phase == "kept":
                print(f"{size:>9} {label:>7} {found['warm_s']:>9.1f}")
                continue
            first, later = found["first"], found["later"]
            warmed = "-" if found["warm_s"] is None else f"{found['warm_s']:.1f}"
            print(
                f"{size:>9} {label:>7} {warmed:>9} {first['ms']:>9.0f} {first['judged']:>7} "
                f"{first['caught']:>7}/{first['copies']:<6} {later['ms']:>9.0f} {later['judged']:>7} "
                f"{later['caught']:>7}/{later['copies']:<6}"
            )


if __name__ == "__main__":
    main()
