"""loom_search over MCP against memory.search over REST: the same requests, one after another, to `make run`.

    .venv/bin/python bench/mcp_search.py [--memories 2000] [--requests 300] [--configs embedded server:1]

Each config is served by `make run` itself (bench/http_load.py's `Served`: the fake 384-d embedder, a scratch var/),
preloaded with LoCoMo turns. Then each LoCoMo question (`fast` budget, top_k 5) is asked in turn each way, the order
rotated from one question to the next, so the box's noise and what a first asking pays fall on each alike: `memory.search` (the baseline) and `search.query` (the same, always paged) over
REST with the standard library's keep-alive client; `loom_search` as a JSON-RPC `tools/call` POSTed to /mcp with
the same client (what the server adds: the SDK's transport and the call run as its op); `loom_search` through the
official SDK's client, one session for the run (what an agent waits for, the client's own Python included: it
shares the box's two cores); and `tools/list` through the SDK, its cost with no op behind it.
Printed: p50 and p95 of each, and each over memory.search, per request (medians of the paired differences: the
noise of the hour cancels).
"""

import argparse
import asyncio
import functools
import statistics
import sys
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_load import Connection, Served, preload
from locomo import corpus

from tests.chserver import Server
from tests.scratch import scratch_dir


async def measure(served: Served, questions: list[str], requests: int) -> dict[str, list[float]]:
    times = {"memory.search": [], "search.query": [], "loom_search rpc": [], "loom_search sdk": [], "tools/list": []}
    rpc_headers = {**served.headers, "Accept": "application/json, text/event-stream"}
    async with (
        httpx2.AsyncClient(headers=served.headers, timeout=60) as http,
        Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as mcp,
    ):
        with Connection(served.url, served.headers) as rest, Connection(served.url, rpc_headers) as rpc:

            async def over_rest(op: str, body: dict) -> None:
                status, _ = rest.call(f"/v1/{op}", body)
                assert status == 200, (op, status)

            async def over_rpc(body: dict) -> None:
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
                status, answer = rpc.call("/mcp", {**call, "params": {"name": "loom_search", "arguments": body}})
                assert status == 200 and not answer["result"]["isError"], answer

            async def over_sdk(body: dict) -> None:
                found = await mcp.call_tool("loom_search", body)
                assert not found.is_error, found.content

            ways = [
                ("memory.search", functools.partial(over_rest, "memory.search")),
                ("search.query", functools.partial(over_rest, "search.query")),
                ("loom_search rpc", over_rpc),
                ("loom_search sdk", over_sdk),
            ]
            for i in range(requests):
                body = {"query": questions[i % len(questions)], "top_k": 5, "retrieval_budget": "fast"}
                # Rotated: the first to ask a question pays what the later ones find cached (its embedding).
                for way, run in ways[i % len(ways) :] + ways[: i % len(ways)]:
                    start = time.perf_counter()
                    await run(body)
                    times[way].append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                await mcp.list_tools(cache_mode="refresh")
                times["tools/list"].append((time.perf_counter() - start) * 1000)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--configs", nargs="+", default=["embedded", "server:1"])
    args = parser.parse_args()
    turns, questions = corpus()
    print(f"{args.memories} memories preloaded, {args.requests} requests each way, one after another; ms")
    print(f"{'config':>9} {'way':>16} {'p50':>7} {'p95':>7} {'over memory.search (median of pairs)':>38}")
    for config in args.configs:
        backend, _, workers = config.partition(":")
        server = Server(scratch_dir("loom-bench-mcp-ch-")) if backend == "server" else None
        served = Served(int(workers or 1), 8, server.url if server else None)
        try:
            preload(served, turns, args.memories)
            times = asyncio.run(measure(served, questions, args.requests))
        finally:
            served.stop()
            if server:
                server.stop()
        base = times["memory.search"]
        for way, taken in times.items():
            cuts = statistics.quantiles(taken, n=100)
            over = statistics.median(a - b for a, b in zip(taken, base)) if way != "memory.search" else 0.0
            print(f"{config:>9} {way:>16} {cuts[49]:>7.2f} {cuts[94]:>7.2f} {over:>+38.2f}")


if __name__ == "__main__":
    main()
