"""Local embedder throughput (batch 64) and single-query latency, with the fake timed in the same run.

    .venv/bin/python bench/embed.py [--texts 2000] [--queries 200]

Texts are LoCoMo dialogue turns (../shared/data/locomo-dev), queries its
questions. The local embedder is all-MiniLM-L6-v2 (int8 ONNX, CPU), loaded
from the installed packages; its load time is reported too.
"""

import argparse
import statistics
import time

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-embed-")

from locomo import corpus

from retrieval.providers.embedders import FakeEmbedder, LocalEmbedder


def measure(embedder, texts: list[str], queries: list[str]) -> tuple[float, float, float]:
    embedder.embed_many(texts[:64])  # warm
    started = time.perf_counter()
    for at in range(0, len(texts), 64):
        embedder.embed_many(texts[at : at + 64])
    rate = len(texts) / (time.perf_counter() - started)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed(query)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return rate, statistics.median(latencies), latencies[int(len(latencies) * 0.95) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    turns, questions = corpus()
    texts = [turns[i % len(turns)] for i in range(args.texts)]
    queries = [questions[i % len(questions)] for i in range(args.queries)]
    started = time.perf_counter()
    local = LocalEmbedder.minilm()
    load_s = time.perf_counter() - started
    print(f"{len(texts)} texts in batches of 64, {len(queries)} single queries; local load {load_s:.2f} s")
    print(f"{'embedder':<22} {'embeddings/s':>13} {'query p50 ms':>13} {'query p95 ms':>13}")
    for name, embedder in (("fake-ngram-384", FakeEmbedder(384)), ("local:minilm", local)):
        rate, p50, p95 = measure(embedder, texts, queries)
        print(f"{name:<22} {rate:>13,.0f} {p50:>13.2f} {p95:>13.2f}")


if __name__ == "__main__":
    main()
