"""What a run's answers measure. Pure functions over questions and answers; no I/O.

A question is *answerable* when it names gold keys and is not marked should_abstain. Over answerable questions:
recall@k (the share of its gold keys in the top k, averaged), hit@k (any gold key in the top k), MRR (1 / the
first gold key's rank, 0 when none was served) and the false-abstain rate. Over should_abstain questions: the
abstain rate. The same definitions as bench/quality.py and the data README, so a set loaded from the LoCoMo split
reproduces the bench's numbers.
"""

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

KS = (1, 5, 10, 20)
RESAMPLES = 1000
SEED = 7


@dataclass(frozen=True)
class Question:
    position: int
    question_id: str
    question: str
    gold_keys: tuple[str, ...]
    should_abstain: bool
    category: str
    answer: str = ""

    @property
    def answerable(self) -> bool:
        return bool(self.gold_keys) and not self.should_abstain


@dataclass(frozen=True)
class Answer:
    served_keys: tuple[str, ...]
    abstain: bool
    abstain_code: str
    latency_ms: float
    cost_usd: float
    error: str = ""

    def recall(self, gold: tuple[str, ...], k: int) -> float:
        return len(set(gold) & set(self.served_keys[:k])) / len(gold)

    def first_rank(self, gold: tuple[str, ...]) -> int | None:
        """The 1-based rank of the first gold key served, None when none was."""
        return next((rank for rank, key in enumerate(self.served_keys, 1) if key in gold), None)


def _scores(questions: list[Question], answers: list[Answer]) -> dict[str, np.ndarray]:
    """Per-question values each metric averages: arrays over the questions it counts."""
    pairs = [(q, a) for q, a in zip(questions, answers) if q.answerable]
    refusing = [a for q, a in zip(questions, answers) if q.should_abstain]
    out = {f"recall@{k}": np.array([a.recall(q.gold_keys, k) for q, a in pairs]) for k in KS}
    out.update({f"hit@{k}": np.array([a.recall(q.gold_keys, k) > 0 for q, a in pairs], float) for k in (1, 5, 10)})
    out["mrr"] = np.array([1 / r if (r := a.first_rank(q.gold_keys)) else 0.0 for q, a in pairs])
    out["false_abstain"] = np.array([a.abstain for _, a in pairs], float)
    out["abstain_rate"] = np.array([a.abstain for a in refusing], float)
    return out


def interval(values: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """The 95% bootstrap interval of the mean (questions resampled with replacement); None without values."""
    if not len(values):
        return None
    picks = np.random.default_rng(seed).integers(0, len(values), (resamples, len(values)))
    means = np.sort(values[picks].mean(axis=1))
    return float(means[int(0.025 * resamples)]), float(means[int(0.975 * resamples) - 1])


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def summarize(questions: list[Question], answers: list[Answer], resamples: int = RESAMPLES) -> dict:
    """One configuration's metrics, each with its 95% interval, and the counts they stand on."""
    scores = _scores(questions, answers)
    latency = np.array([a.latency_ms for a in answers])
    return {
        "metrics": {name: _mean(values) for name, values in scores.items()},
        "intervals": {name: interval(values, resamples) for name, values in scores.items()},
        "answerable": len(scores["mrr"]),
        "should_abstain": len(scores["abstain_rate"]),
        "questions": len(answers),
        "errors": sum(bool(a.error) for a in answers),
        "latency_ms": {
            "p50": float(np.percentile(latency, 50)) if len(latency) else None,
            "p95": float(np.percentile(latency, 95)) if len(latency) else None,
        },
        "cost_usd": {
            "total": sum(a.cost_usd for a in answers),
            "per_question": _mean(np.array([a.cost_usd for a in answers])),
        },
        "abstain_codes": _codes(answers),
    }


def _codes(answers: list[Answer]) -> dict[str, int]:
    counts = defaultdict(int)
    for answer in answers:
        if answer.abstain:
            counts[answer.abstain_code] += 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


PER_CATEGORY = ("recall@10", "hit@10", "mrr", "abstain_rate", "false_abstain")


def by_category(questions: list[Question], answers: list[Answer], resamples: int = RESAMPLES) -> dict[str, dict]:
    """Per category: recall@10, hit@10, MRR, abstain and false-abstain rates with their 95% intervals (a small
    category's are wide: read them before a difference), and how many questions."""
    groups = defaultdict(list)
    for q, a in zip(questions, answers):
        groups[q.category].append((q, a))
    out = {}
    for category in sorted(groups, key=lambda c: (c == "", c)):
        qs, answered = zip(*groups[category])
        scores = _scores(list(qs), list(answered))
        out[category] = {
            "questions": len(qs),
            **{name: _mean(scores[name]) for name in PER_CATEGORY},
            "intervals": {name: interval(scores[name], resamples) for name in PER_CATEGORY},
        }
    return out


def outcome(question: Question, answer: Answer) -> tuple[float, ...]:
    """How well one answer did, comparable between configurations. Answerable: recall@10, then 1/first gold rank,
    then not abstaining (an abstained search still serves its hits, marked). Should abstain: abstaining."""
    if question.should_abstain:
        return (float(answer.abstain),)
    if not question.gold_keys:
        return ()
    rank = answer.first_rank(question.gold_keys)
    return (answer.recall(question.gold_keys, 10), 1 / rank if rank else 0.0, float(not answer.abstain))


def wins_losses(questions: list[Question], a: list[Answer], b: list[Answer]) -> dict:
    """Per question where the two configurations differ: `b` against `a` (a win is b doing better)."""
    rows = []
    for q, left, right in zip(questions, a, b):
        before, after = outcome(q, left), outcome(q, right)
        if before == after:
            continue
        rows.append(
            {
                "position": q.position,
                "question_id": q.question_id,
                "question": q.question,
                "category": q.category,
                "should_abstain": q.should_abstain,
                "verdict": "win" if after > before else "loss",
                "a": _seen(q, left),
                "b": _seen(q, right),
            }
        )
    rows.sort(key=lambda row: (row["verdict"] != "loss", row["position"]))
    wins = sum(row["verdict"] == "win" for row in rows)
    return {"wins": wins, "losses": len(rows) - wins, "ties": len(questions) - len(rows), "rows": rows}


def _seen(question: Question, answer: Answer) -> dict:
    return {
        "first_gold_rank": answer.first_rank(question.gold_keys) if question.gold_keys else None,
        "recall@10": answer.recall(question.gold_keys, 10) if question.gold_keys else None,
        "abstain": answer.abstain,
        "abstain_code": answer.abstain_code,
    }
