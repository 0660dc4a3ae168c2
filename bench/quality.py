"""Retrieval quality on a LoCoMo-format split: recall@k per mode, on leave-one-conversation-out folds, with
bootstrap confidence intervals, and the abstain rates.

    .venv/bin/python bench/quality.py [--data ../shared/data/locomo-dev] [--modes semantic hybrid ...]
                                      [--alphas 0.15 0.25 0.35 0.5] [--resamples 1000]
                                      [--digests [WEIGHT ...] [--digest-sessions N ...]]

Each conversation goes into its own namespace (one memory per dialogue turn,
valid_at = the session's date, the speaker as entity), through the service
layer with the embedder this process is configured with (LOOM_EMBEDDING_MODEL;
`make bench-quality` uses the local model, as `make run` does; the fake knows
spelling, not meaning). Every question is searched in its own conversation's
namespace with top_k 20 through `service.search()`, `fast` budget: no model call.

Reported:
- per mode, over every question: recall@1/5/10/20 on categories 1-4 (share of
  gold turns in the top k) with a 95% bootstrap interval on recall@10 (questions
  resampled), hit@10, the abstain rate on category 0 (another conversation's
  question) and category 5 (adversarial), the false-abstain rate on 1-4, and the
  abstain codes;
- the folds: each conversation held out in turn, `hybrid`'s alpha chosen on the
  others (the grid `--alphas`), recall@10 of the held-out conversation with its
  interval, against the BM25 reference on the same questions (the issue's bar:
  BM25 + 25% on every fold);
- with `--digests`: the split's sessions.jsonl written through session_summary.set after the rest, and the
  default search measured again per digest-descent weight, per category and per conversation;
- `default`: what a request that names no mode gets (LOOM_MEMORY_SEARCH_DEFAULT_MODE
  and _ALPHA of this process: `make run` ships hybrid);
- the default search per conversation and overall: recall@10 (interval) and @20 of the window, @50 and @100 of the
  pool as fused (the same search at top_k 100), the abstain rates with intervals on category 0 and on the renamed
  negatives (category 0 asked again with the borrowed conversation's people renamed to this one's: every name
  known, only the fact absent), the false-abstain rate, and the p50 latency of a search;
- with `--eval-sets`: each conversation's questions uploaded as the question set `locomo` of its namespace and run
  by the product's evaluation (retrieval/evaluation, what eval.run and `loom_eval` do) under the same
  configuration as `default` (top_k 20, fast budget): its recall@10 beside this script's, per conversation.
Baseline in the same run: plain BM25 (k1 1.2, b 0.75, lowercase word tokens,
no stemming) over the same turns, in Python.
"""

import argparse
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.scratch import scratch_dir

if "LOOM_VAR_DIR" not in os.environ:  # a kept var/ (with its loaded corpus) may be passed in
    os.environ["LOOM_VAR_DIR"] = scratch_dir("loom-bench-quality-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")

import django

django.setup()

from django.conf import settings

from retrieval import caching, knobs, options
from retrieval.evaluation import runs, sets
from retrieval.gates import calibration, thresholds
from retrieval.ingest import digests, write
from retrieval.providers.embedders import get_embedder
from retrieval.search import service
from retrieval.search.plan import SearchRequest
from retrieval.store import schema
from tenancy.access import Scope
from tenancy.roles import Role

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# This script's own category: a cross-conversation negative (category 0) with the borrowed conversation's people
# renamed to this one's, so every name is known and only the fact is absent.
RENAMED = 6


def scope_for(conv: str) -> Scope:
    return Scope(org="bench", namespace=conv, role=Role.ADMIN, subject="bench")


def turn_row(m: dict) -> write.MemoryInput:
    """A split's turn as a memory: valid_at the session's date, the speaker as entity."""
    return write.MemoryInput(
        memory_key=m["key"],
        value=m["text"],
        memory_type="turn",
        entities=[m["speaker"]],
        session_id=str(m["session"]),
        valid_at=datetime.fromisoformat(m["date"] + "+00:00"),
    )


def load(memories: list[dict]) -> None:
    by_conv = defaultdict(list)
    for m in memories:
        by_conv[m["conv"]].append(turn_row(m))
    for conv, items in by_conv.items():
        for start in range(0, len(items), 500):
            write.set_memories(scope_for(conv), items[start : start + 500])


class BM25:
    """The data README's reference: lowercase word tokens, no stemming, k1 1.2, b 0.75."""

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


class Answers:
    """One configuration's answer to every question: served keys, abstain and its code."""

    def __init__(self, name: str, queries: list[dict], run):
        self.name, self.queries, self.served, self.ms = name, queries, [], []
        for q in queries:
            started = time.perf_counter()
            self.served.append(run(q))
            self.ms.append((time.perf_counter() - started) * 1000)

    def recall(self, k: int, convs=None) -> list[float]:
        """Per answerable question (categories 1-4, in `convs`): the share of its gold keys in the top k."""
        return [
            len(set(q["gold_keys"]) & set(keys[:k])) / len(q["gold_keys"])
            for q, (keys, _, _) in zip(self.queries, self.served)
            if q["category"] in CATEGORIES and q["gold_keys"] and (convs is None or q["conv"] in convs)
        ]

    def by_category(self, k: int) -> dict[int, float]:
        out = defaultdict(list)
        for q, (keys, _, _) in zip(self.queries, self.served):
            if q["category"] in CATEGORIES and q["gold_keys"]:
                out[q["category"]].append(len(set(q["gold_keys"]) & set(keys[:k])) / len(q["gold_keys"]))
        return {cat: mean(values) for cat, values in out.items()}

    def abstains(self, categories, convs=None) -> list[bool]:
        return [
            abstain
            for q, (_, abstain, _) in zip(self.queries, self.served)
            if q["category"] in categories and (convs is None or q["conv"] in convs)
        ]

    def abstain_rate(self, categories) -> float:
        return mean(self.abstains(categories))

    def p50_ms(self, convs=None) -> float:
        return statistics.median(ms for q, ms in zip(self.queries, self.ms) if convs is None or q["conv"] in convs)

    def hit(self, k: int) -> float:
        return mean(
            [
                bool(set(q["gold_keys"]) & set(keys[:k]))
                for q, (keys, _, _) in zip(self.queries, self.served)
                if q["category"] in CATEGORIES and q["gold_keys"]
            ]
        )

    def codes(self) -> Counter:
        return Counter(code for _, abstain, code in self.served if abstain)


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def interval(values: list[float], resamples: int, seed: int = 7) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean (questions resampled with replacement)."""
    rng = random.Random(seed)
    means = sorted(mean(rng.choices(values, k=len(values))) for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def renamed(data: Path, queries: list[dict]) -> list[dict]:
    """Each category-0 question of `queries` that says where it was borrowed from (`borrowed_from`, as the dev
    split's do), asked again with that conversation's speakers renamed to its own conversation's, in the order they
    first speak (the first to the first). A conversation the split does not hold (conv-41 borrows from conv-42) is
    known by its questions: its two names they use most."""
    speakers = defaultdict(list)
    for m in map(json.loads, (data / "memories.jsonl").open()):
        if m["speaker"] not in speakers[m["conv"]]:
            speakers[m["conv"]].append(m["speaker"])
    negatives = [q for q in queries if q["category"] == 0 and q.get("borrowed_from")]  # else nothing to rename
    for source in {q["borrowed_from"].split(":")[0] for q in negatives} - set(speakers):
        used = Counter(
            name
            for q in negatives
            if q["borrowed_from"].startswith(f"{source}:")
            for name in re.findall(r"(?<=\s)[A-Z][a-z]+", q["question"])
        )
        speakers[source] = [name for name, _ in used.most_common(2)]
    out = []
    for q in negatives:
        names = dict(zip(speakers[q["borrowed_from"].split(":")[0]], speakers[q["conv"]]))
        question = re.sub(
            rf"\b({'|'.join(map(re.escape, names))})\b", lambda found, names=names: names[found[1]], q["question"]
        )
        out.append({**q, "qid": f"{q['qid']}:renamed", "question": question, "category": RENAMED})
    return out


def split(data: Path, convs: list[str] | None) -> tuple[list[dict], list[dict]]:
    """The split's turns and questions (of these conversations, or all), with the engine's schema and the gates a
    deployment of this process's embedder serves in place."""
    memories = [json.loads(line) for line in (data / "memories.jsonl").open()]
    queries = [json.loads(line) for line in (data / "queries.jsonl").open()]
    if convs:
        memories = [m for m in memories if m["conv"] in convs]
        queries = [q for q in queries if q["conv"] in convs]
    schema.apply()
    embedder = get_embedder()
    if thresholds.adaptive(embedder.model_name):
        calibration.recalibrate(embedder)
        caching.forget_all()
    return memories, queries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo-dev"))
    parser.add_argument("--modes", nargs="*", default=list(options.SEARCH_MODES))
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.15, 0.25, 0.35, 0.5])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--convs", nargs="+", help="only these conversations (default: every one)")
    parser.add_argument(
        "--eval-sets", action="store_true", help="also run the questions as question sets through the evaluation"
    )
    parser.add_argument(
        "--digest-sessions", nargs="+", type=int, help="with --digests: the numbers of nearest digests to try"
    )
    parser.add_argument(
        "--digests",
        nargs="*",
        type=float,
        metavar="WEIGHT",
        help="then load sessions.jsonl's digests (session_summary.set) and measure again, with these weights of "
        "the session_digest term (default: the shipped one), per conversation too",
    )
    args = parser.parse_args()
    data = Path(args.data)
    memories, queries = split(data, args.convs)
    queries += renamed(data, queries)
    convs = sorted({q["conv"] for q in queries})
    embedder = get_embedder()
    load(memories)
    bm25 = {conv: BM25({m["key"]: m["text"] for m in memories if m["conv"] == conv}) for conv in convs}

    def searcher(**fields):
        def run(q):
            request = SearchRequest(query=q["question"], **{"top_k": 20, "retrieval_budget": "fast", **fields})
            result = service.search(scope_for(q["conv"]), request)
            return [hit["memory_key"] for hit in result.hits], result.abstain, result.abstain_code

        return run

    reference = Answers(
        "BM25 reference (Python)", queries, lambda q: (bm25[q["conv"]].search(q["question"], 20), False, None)
    )
    table = [reference, Answers("default", queries, searcher())]
    pool = Answers("default, top 100", [q for q in queries if q["category"] in CATEGORIES], searcher(top_k=100))
    table += [Answers(mode, queries, searcher(search_mode=mode)) for mode in args.modes]
    by_alpha = {
        alpha: Answers(f"hybrid a={alpha}", queries, searcher(search_mode="hybrid", alpha=alpha))
        for alpha in args.alphas
    }

    gates = thresholds.resolve("bench", convs[0], embedder.model_name)
    print(
        f"{data.name}: {len(memories)} turns, {len(queries)} questions, {len(convs)} conversations; embedder "
        f"{embedder.model_name}; top_k 20, fast budget; default mode {settings.LOOM_MEMORY_SEARCH_DEFAULT_MODE} "
        f"(alpha {settings.LOOM_MEMORY_SEARCH_DEFAULT_ALPHA}); gates {gates.tier} (floor {gates.min_similarity:.3f}, "
        f"abstain {gates.abstain:.3f})\n"
    )
    print(
        f"{'mode':<24}" + "".join(f"{'R@' + str(k):>7}" for k in KS) + f"{'R@10 95% CI':>16}{'hit@10':>8}"
        f"{'abst c0':>9}{'abst c5':>9}{'false ab':>9}  abstain codes"
    )
    for answers in table + list(by_alpha.values()):
        recall10 = answers.recall(10)
        low, high = interval(recall10, args.resamples)
        row = "".join(f"{mean(answers.recall(k)):>7.3f}" for k in KS)
        codes = ", ".join(f"{code} {count}" for code, count in answers.codes().most_common())
        print(
            f"{answers.name:<24}{row}{f'{low:.3f}-{high:.3f}':>16}{answers.hit(10):>8.3f}"
            f"{answers.abstain_rate({0}):>9.3f}{answers.abstain_rate({5}):>9.3f}"
            f"{answers.abstain_rate(set(CATEGORIES)):>9.3f}  {codes}"
        )

    print("\nrecall@10 per category")
    print(f"{'mode':<24}" + "".join(f"{label:>13}" for label in CATEGORIES.values()))
    for answers in table:
        per = answers.by_category(10)
        print(f"{answers.name:<24}" + "".join(f"{per.get(cat, float('nan')):>13.3f}" for cat in CATEGORIES))

    print(
        "\nleave-one-conversation-out: hybrid's alpha chosen on the other conversations, recall@10 of the held-out one"
    )
    print(
        f"{'held out':<10}{'alpha':>7}{'R@10':>8}{'95% CI':>15}{'BM25':>8}{'x BM25':>8}{'default':>9}"
        f"{'abst c0':>9}{'false ab':>9}"
    )
    default = table[1]
    for held in convs:
        rest = [conv for conv in convs if conv != held]
        alpha = max(args.alphas, key=lambda a: (mean(by_alpha[a].recall(10, rest)), -abs(a - 0.25)))
        chosen = by_alpha[alpha].recall(10, {held})
        low, high = interval(chosen, args.resamples)
        base = mean(reference.recall(10, {held}))
        held_queries = [q for q in queries if q["conv"] == held]
        cat0 = mean(
            [abstain for q, (_, abstain, _) in zip(queries, default.served) if q["conv"] == held and q["category"] == 0]
        )
        false = mean(
            [
                abstain
                for q, (_, abstain, _) in zip(queries, default.served)
                if q["conv"] == held and q["category"] in CATEGORIES
            ]
        )
        print(
            f"{held:<10}{alpha:>7.2f}{mean(chosen):>8.3f}{f'{low:.3f}-{high:.3f}':>15}{base:>8.3f}"
            f"{mean(chosen) / base:>8.2f}{mean(default.recall(10, {held})):>9.3f}{cat0:>9.3f}{false:>9.3f}"
            f"   ({len(held_queries)} questions)"
        )
    report(convs, default, pool, args.resamples)
    if args.eval_sets:
        through_evaluation(queries, convs, default)
    if args.digests is not None:
        with_digests(data, queries, convs, default, args.digests, args.digest_sessions, searcher, args.resamples)


def report(convs: list[str], default: Answers, pool: Answers, resamples: int) -> None:
    """The default search per conversation (nothing is tuned on it) and overall: recall@10 and @20 of the window,
    @50 and @100 of the pool as fused (a top-100 search), each abstain rate with its interval, p50 latency."""

    def rate(values: list) -> str:
        low, high = interval([float(v) for v in values], resamples)
        return f"{mean(values):.3f} {low:.3f}-{high:.3f}"

    print("\nthe default search per conversation: recall of the window and of the pool, each abstain, latency")
    print(
        f"{'conversation':<14}{'R@10':>20}{'R@20':>7}{'pool@50':>9}{'pool@100':>10}{'abstain c0':>20}"
        f"{'abstain renamed':>20}{'false abstain':>20}{'p50 ms':>8}"
    )
    for conv in [*convs, None]:
        within = None if conv is None else {conv}
        print(
            f"{conv or 'all':<14}{rate(default.recall(10, within)):>20}{mean(default.recall(20, within)):>7.3f}"
            f"{mean(pool.recall(50, within)):>9.3f}{mean(pool.recall(100, within)):>10.3f}"
            f"{rate(default.abstains({0}, within)):>20}{rate(default.abstains({RENAMED}, within)):>20}"
            f"{rate(default.abstains(set(CATEGORIES), within)):>20}{default.p50_ms(within):>8.1f}"
        )


def through_evaluation(queries, convs, default: "Answers") -> None:
    """Each conversation's questions as a question set, run by the product's evaluation under `default`'s
    configuration: the same search(), so the same recall@10."""
    config = {"name": "default", "top_k": 20, "retrieval_budget": "fast"}
    print("\nthe product's evaluation (question set locomo per conversation, eval.run), against this script's default")
    print(
        f"{'conversation':<14}{'questions':>10}{'R@10 eval':>11}{'R@10 bench':>12}{'abstain c0+5':>14}"
        f"{'run s':>8}{'p50 ms':>8}"
    )
    for conv in convs:
        scope = scope_for(conv)
        questions = [
            {
                "id": q["qid"],
                "question": q["question"],
                "gold_keys": q["gold_keys"],
                "should_abstain": q["should_abstain"],
                "category": str(q["category"]),
            }
            for q in queries
            if q["conv"] == conv
        ]
        sets.upload(scope, "locomo", questions)
        started = time.perf_counter()
        run = runs.start(scope, "locomo", [config], started_from="cli", wait=True)
        took = time.perf_counter() - started
        result = runs.report(scope, run["run_id"])["results"]["default"]
        measured = result["metrics"]
        print(
            f"{conv:<14}{len(questions):>10}{measured['recall@10']:>11.3f}{mean(default.recall(10, {conv})):>12.3f}"
            f"{measured['abstain_rate']:>14.3f}{took:>8.1f}{result['latency_ms']['p50']:>8.1f}"
        )


def with_digests(data, queries, convs, without: "Answers", weights, nearest_counts, searcher, resamples):
    """Load the sessions' digests through the digest write path, then measure the default search again, per descent
    weight and number of digests descended from, per conversation too."""
    sessions = [json.loads(line) for line in (data / "sessions.jsonl").open()]
    for conv in convs:
        items = [
            digests.DigestInput(str(s["session"]), s["summary"], datetime.fromisoformat(s["date"] + "+00:00"))
            for s in sessions
            if s["conv"] == conv
        ]
        digests.set_digests(scope_for(conv), "bench", items)
    shipped = (knobs.DIGEST_DESCENT, knobs.DIGEST_SESSIONS)
    runs = {}
    for weight in weights or [shipped[0]]:
        for nearest in nearest_counts or [shipped[1]]:
            knobs.DIGEST_DESCENT, knobs.DIGEST_SESSIONS = weight, nearest
            runs[(weight, nearest)] = Answers(f"digests w={weight} n={nearest}", queries, searcher())
    knobs.DIGEST_DESCENT, knobs.DIGEST_SESSIONS = shipped
    print(f"\nsession digests ({len(sessions)} from {data.name}/sessions.jsonl): the default search again")
    print(
        f"{'':<32}{'R@10':>7}{'95% CI':>15}{'abst c0':>9}{'false ab':>9}"
        + "".join(f"{label:>13}" for label in CATEGORIES.values())
        + "".join(f"{conv:>9}" for conv in convs)
    )
    for answers in [without, *runs.values()]:
        recall10 = answers.recall(10)
        low, high = interval(recall10, resamples)
        per = answers.by_category(10)
        print(
            f"{answers.name:<32}{mean(recall10):>7.3f}{f'{low:.3f}-{high:.3f}':>15}{answers.abstain_rate({0}):>9.3f}"
            f"{answers.abstain_rate(set(CATEGORIES)):>9.3f}"
            + "".join(f"{per.get(cat, float('nan')):>13.3f}" for cat in CATEGORIES)
            + "".join(f"{mean(answers.recall(10, {conv})):>9.3f}" for conv in convs)
        )
    print("leave-one-conversation-out: the weight and number of digests chosen on the other conversations")
    for held in convs:
        rest = [conv for conv in convs if conv != held]
        chosen = max(runs, key=lambda at: (mean(runs[at].recall(10, rest)), -at[0]))
        print(
            f"{held:<10} w={chosen[0]} n={chosen[1]}: R@10 {mean(runs[chosen].recall(10, {held})):.3f}"
            f" without digests {mean(without.recall(10, {held})):.3f}"
        )


if __name__ == "__main__":
    main()
