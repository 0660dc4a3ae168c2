"""Concurrent clients against the served app over HTTP: requests/s, latency, errors, and every acknowledged write
read back.

    .venv/bin/python bench/http_load.py [--clients 8] [--seconds 20] [--memories 2000] [--configs embedded server:4]
                                        [--write-every 5]

Each config is served by `make run` itself (gunicorn, 8 threads per worker; the fake 384-d embedder):
`embedded` on the embedded engine (one worker), `server:N` with N workers on a ClickHouse HTTP server on loopback
(tests/chserver.py), `server:N:host` the same with LOOM_CHANGE_MARKER=host (the workers share the host's stamps
instead of asking the engine what changed on every search). The namespace is preloaded with LoCoMo turns; then each client loops for the duration: searches
(LoCoMo questions, `fast` budget) and every `--write-every`th request (5; 0: none) a write of a fresh key, as fast
as answers come. After the run every
acknowledged write is read back (memory.bulk_get, through any worker). The baseline, timed in the same run against
the same server: `GET /v1/health`, the cheapest request the app answers.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from locomo import corpus

from tests.chserver import Server, free_port
from tests.scratch import scratch_dir


class Served:
    """`make run` itself (PORT, WORKERS), in a scratch var/ directory, with the fake embedder."""

    def __init__(self, workers: int, clickhouse_url: str | None, marker: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        var = scratch_dir("loom-bench-http-")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "DJANGO_"))},
            "LOOM_VAR_DIR": var,
            "LOOM_EMBEDDING_MODEL": "fake-ngram-384",
            "LOOM_CHANGE_MARKER": marker,
            **({"LOOM_CLICKHOUSE_URL": clickhouse_url} if clickhouse_url else {}),
        }
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={self.port}", f"WORKERS={workers}"],
            cwd=ROOT,
            env=env,
            stdout=open(Path(var) / "make-run.log", "wb"),  # noqa: SIM115 -- make run's, read if it fails
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stop() signals make and the gunicorn it runs together
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=2).status_code == 200:
                    credentials = json.loads((Path(var) / "demo-credentials.json").read_text())
                    self.headers = {"Authorization": f"Bearer {credentials['token']}"}
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        tail = (Path(var) / "make-run.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"make run did not answer /v1/health within 120 s:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)


def preload(served: Served, turns: list[str], count: int) -> None:
    with httpx.Client(base_url=served.url, headers=served.headers, timeout=120) as client:
        for start in range(0, count, 500):
            items = [
                {"memory_key": f"m{i}", "value": turns[i % len(turns)]} for i in range(start, min(start + 500, count))
            ]
            client.post("/v1/memory.set", json={"items": items}).raise_for_status()


def note(key: str, questions: list[str]) -> str:
    """What the load writes under `key` (load-<client>-<step>)."""
    _, number, step = key.split("-")
    return f"client {number} wrote note {step}: {questions[int(step) % len(questions)]}"


def load(served: Served, questions: list[str], clients: int, seconds: float, write_every: int) -> dict:
    latencies, errors, acknowledged = [], [], []
    lock, deadline = threading.Lock(), time.monotonic() + seconds

    def client_loop(number: int) -> None:
        with httpx.Client(base_url=served.url, headers=served.headers, timeout=30) as client:
            step = 0
            while time.monotonic() < deadline:
                step += 1
                writing = bool(write_every) and step % write_every == 0
                key = f"load-{number}-{step}"
                body = (
                    {"memory_key": key, "value": note(key, questions)}
                    if writing
                    else {"query": questions[(number * 7 + step) % len(questions)], "retrieval_budget": "fast"}
                )
                started = time.perf_counter()
                try:
                    answer = client.post("/v1/memory.set" if writing else "/v1/memory.search", json=body)
                    ok = answer.status_code in (200, 201)
                except httpx.TransportError as exc:
                    answer, ok = exc, False
                spent = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(spent)
                    if not ok:
                        errors.append(str(getattr(answer, "status_code", answer)))
                    elif writing:
                        acknowledged.append(key)

    started = time.monotonic()
    threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    missing = 0
    with httpx.Client(base_url=served.url, headers=served.headers, timeout=60) as client:
        for start in range(0, len(acknowledged), 1000):
            answer = client.post("/v1/memory.bulk_get", json={"memory_keys": acknowledged[start : start + 1000]})
            missing += len(answer.json()["missing"])
    return {
        "rps": len(latencies) / elapsed,
        "latencies": latencies,
        "errors": errors,
        "writes": len(acknowledged),
        "keys": acknowledged,
        "missing": missing,
    }


def baseline(served: Served, clients: int, seconds: float) -> float:
    """Health checks per second with the same clients: what the server answers when the app does no work."""
    count, lock, deadline = [0], threading.Lock(), time.monotonic() + seconds

    def loop() -> None:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            while time.monotonic() < deadline:
                client.get("/v1/health")
                with lock:
                    count[0] += 1

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count[0] / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--configs", nargs="+", default=["embedded", "server:4"])
    parser.add_argument("--write-every", type=int, default=5, help="every Nth request writes (0: searches only)")
    args = parser.parse_args()
    turns, questions = corpus()
    mix = f"1 write in {args.write_every}" if args.write_every else "searches only"
    print(f"{args.clients} clients, {args.seconds:g} s, {args.memories} memories preloaded; {mix}; ms")
    print(
        f"{'config':>13} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'errors':>7} {'writes':>7} {'lost':>5} "
        f"{'health/s':>9}"
    )
    for config in args.configs:
        backend, _, rest = config.partition(":")
        workers, _, marker = rest.partition(":")
        server = Server(scratch_dir("loom-bench-http-ch-")) if backend == "server" else None
        served = Served(int(workers or 1), server.url if server else None, marker or "engine")
        try:
            preload(served, turns, args.memories)
            result = load(served, questions, args.clients, args.seconds, args.write_every)
            health = baseline(served, args.clients, min(args.seconds, 5))
        finally:
            served.stop()
            if server:
                server.stop()
        cuts = statistics.quantiles(result["latencies"], n=100)
        print(
            f"{config:>13} {result['rps']:>7.1f} {cuts[49]:>7.1f} {cuts[94]:>7.1f} {cuts[98]:>7.1f} "
            f"{len(result['errors']):>7} {result['writes']:>7} {result['missing']:>5} {health:>9.1f}"
        )
        if result["errors"]:
            print(f"{'':>13} errors: {sorted(set(result['errors']))}")


if __name__ == "__main__":
    main()
