"""Retrieval quality on the LoCoMo dev split: recall@k per category and search_mode, and abstain rates.

    .venv/bin/python bench/quality.py [--modes semantic rrf ...] [--data ../shared/data/locomo-dev]

Each conversation goes into its own namespace (one memory per dialogue turn,
valid_at = the session's date, the speaker as entity), through the service
layer with the embedder this process is configured with (LOOM_EMBEDDING_MODEL;
the fake by default, which knows spelling, not meaning). Every question is
searched in its own conversation's namespace with top_k 20 through
`service.search()`.

Reported per mode: recall@1/5/10/20 (share of gold turns in the top k) on
categories 1-4, per category and overall; hit@10; the abstain rate on the
questions that should abstain (category 0: another conversation's question;
category 5: adversarial, reported apart); and the false-abstain rate on 1-4.
Baseline in the same run: plain BM25 (k1 1.2, b 0.75, lowercase word tokens,
no stemming) over the same turns, in Python.
"""

import argparse
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.scratch import scratch_dir  # noqa: E402

if "LOOM_VAR_DIR" not in os.environ:  # a kept var/ (with its loaded corpus) may be passed in
    os.environ["LOOM_VAR_DIR"] = scratch_dir("loom-bench-quality-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")

import django  # noqa: E402

django.setup()

from retrieval import calibration, options, schema, service, thresholds, write  # noqa: E402
from retrieval.plan import SearchRequest  # noqa: E402
from retrieval.providers.embedders import get_embedder  # noqa: E402
from tenancy.access import Scope  # noqa: E402
from tenancy.roles import Role  # noqa: E402

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def scope_for(conv: str) -> Scope:
    return Scope(org="bench", namespace=conv, role=Role.ADMIN, subject="bench")


def load(memories: list[dict]) -> None:
    by_conv = defaultdict(list)
    for m in memories:
        by_conv[m["conv"]].append(
            write.MemoryInput(
                memory_key=m["key"], value=m["text"], memory_type="turn", entities=[m["speaker"]],
                session_id=str(m["session"]), valid_at=datetime.fromisoformat(m["date"] + "+00:00"),
            )
        )  # fmt: skip
    for conv, items in by_conv.items():
        for start in range(0, len(items), 500):
            write.set_memories(scope_for(conv), items[start : start + 500])


class BM25:
    """The README's reference: lowercase word tokens, no stemming, k1 1.2, b 0.75."""

    def __init__(self, docs: dict[str, str]):
        self.tokens = {key: re.findall(r"\w+", text.lower()) for key, text in docs.items()}
        self.avgdl = sum(len(t) for t in self.tokens.values()) / len(self.tokens)
        self.df = Counter(term for terms in self.tokens.values() for term in set(terms))
        self.tf = {key: Counter(terms) for key, terms in self.tokens.items()}

    def search(self, query: str, k: int) -> list[str]:
        n = len(self.tokens)
        scores = {}
        for key, tf in self.tf.items():
            length = len(self.tokens[key])
            score = 0.0
            for term in set(re.findall(r"\w+", query.lower())):
                if term in tf:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * length / self.avgdl))
            if score:
                scores[key] = score
        return [key for key, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]]


def evaluate(name: str, run, queries: list[dict]) -> dict:
    recall = defaultdict(lambda: defaultdict(list))
    hits10, abstained = [], defaultdict(list)
    for q in queries:
        keys, abstain = run(q)
        if q["category"] in CATEGORIES and q["gold_keys"]:
            gold = set(q["gold_keys"])
            for k in KS:
                share = len(gold & set(keys[:k])) / len(gold)
                recall[q["category"]][k].append(share)
                recall["all"][k].append(share)
            hits10.append(bool(gold & set(keys[:10])))
            abstained["false"].append(abstain)
        elif q["category"] == 0:
            abstained["cat0"].append(abstain)
        elif q["category"] == 5:
            abstained["cat5"].append(abstain)
    mean = lambda values: sum(values) / len(values) if values else float("nan")  # noqa: E731
    return {
        "name": name,
        "recall": {cat: {k: mean(v) for k, v in by_k.items()} for cat, by_k in recall.items()},
        "hit@10": mean(hits10),
        "abstain_cat0": mean(abstained["cat0"]),
        "abstain_cat5": mean(abstained["cat5"]),
        "false_abstain": mean(abstained["false"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo-dev"))
    parser.add_argument("--modes", nargs="+", default=list(options.SEARCH_MODES))
    args = parser.parse_args()
    data = Path(args.data)
    memories = [json.loads(line) for line in (data / "memories.jsonl").open()]
    queries = [json.loads(line) for line in (data / "queries.jsonl").open()]
    schema.apply()
    embedder = get_embedder()
    if thresholds.adaptive(embedder.model_name):  # the gates a deployment of this embedder serves
        calibration.recalibrate(embedder)
        thresholds.forget()
    load(memories)
    bm25 = {conv: BM25({m["key"]: m["text"] for m in memories if m["conv"] == conv}) for conv in {m["conv"] for m in memories}}
    results = [evaluate("BM25 reference (Python)", lambda q: (bm25[q["conv"]].search(q["question"], 20), False), queries)]
    for mode in args.modes:
        def run(q, mode=mode):
            result = service.search(scope_for(q["conv"]), SearchRequest(query=q["question"], top_k=20, search_mode=mode))
            return [hit["memory_key"] for hit in result.hits], result.abstain

        results.append(evaluate(mode, run, queries))
    gates = thresholds.resolve("bench", "", embedder.model_name)
    print(f"LoCoMo dev ({len(memories)} turns, {len(queries)} questions), embedder {embedder.model_name}, top_k 20, "
          f"gates {gates.tier} (floor {gates.min_similarity:.3f}, abstain {gates.abstain:.3f})")
    print(f"{'mode':<24}" + "".join(f"{'R@' + str(k):>7}" for k in KS) + f"{'hit@10':>8}{'abst c0':>9}{'abst c5':>9}{'false ab':>9}")
    for r in results:
        row = "".join(f"{r['recall']['all'][k]:>7.3f}" for k in KS)
        print(f"{r['name']:<24}{row}{r['hit@10']:>8.3f}{r['abstain_cat0']:>9.3f}{r['abstain_cat5']:>9.3f}{r['false_abstain']:>9.3f}")
    print("\nrecall@10 per category")
    print(f"{'mode':<24}" + "".join(f"{label:>13}" for label in CATEGORIES.values()))
    for r in results:
        print(f"{r['name']:<24}" + "".join(f"{r['recall'][cat][10]:>13.3f}" for cat in CATEGORIES))


if __name__ == "__main__":
    main()
