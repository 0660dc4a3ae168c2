"""The evaluation's metrics on answers checked by hand (retrieval/evaluation/metrics.py)."""

import numpy as np
import pytest

from retrieval.evaluation.metrics import Answer, Question, by_category, interval, summarize, wins_losses


def q(position, gold=(), abstain=False, category="a"):
    return Question(position, str(position + 1), f"question {position}", tuple(gold), abstain, category)


def a(*served, abstain=False, latency=10.0, cost=0.0):
    return Answer(tuple(served), abstain, "NO_MATCH" if abstain else "", latency, cost)


QUESTIONS = [
    q(0, ["k1"]),  # found first
    q(1, ["k2", "k3"], category="b"),  # one of two, at rank 2
    q(2, ["k4"]),  # not served
    q(3, abstain=True, category="b"),  # abstained: right
    q(4, ["trap"], abstain=True),  # served its trap turn and did not abstain: wrong
]
ANSWERS = [
    a("k1", "x", latency=10),
    a("x", "k2", latency=20, cost=0.002),
    a("x", "y", abstain=True, latency=30),
    a(abstain=True, latency=40),
    a("trap", latency=50),
]


def test_each_metric_by_hand():
    summary = summarize(QUESTIONS, ANSWERS)
    m = summary["metrics"]
    # Answerable: questions 0, 1, 2. recall@1: 1, 0, 0; recall@5 on: 1, 1/2, 0.
    assert m["recall@1"] == pytest.approx(1 / 3)
    assert m["recall@5"] == m["recall@10"] == m["recall@20"] == pytest.approx(1.5 / 3)
    assert m["hit@1"] == pytest.approx(1 / 3) and m["hit@5"] == pytest.approx(2 / 3)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 0) / 3)
    assert m["false_abstain"] == pytest.approx(1 / 3)  # question 2 abstained though answerable
    assert m["abstain_rate"] == pytest.approx(1 / 2)  # of questions 3 and 4, 3 abstained
    assert (summary["answerable"], summary["should_abstain"], summary["questions"]) == (3, 2, 5)
    assert summary["latency_ms"] == {"p50": 30.0, "p95": pytest.approx(48.0)}
    assert summary["cost_usd"]["total"] == pytest.approx(0.002)
    assert summary["abstain_codes"] == {"NO_MATCH": 2}


def test_intervals_hold_the_mean_and_are_none_without_questions():
    summary = summarize(QUESTIONS, ANSWERS)
    low, high = summary["intervals"]["recall@10"]
    assert low <= summary["metrics"]["recall@10"] <= high and low < high
    assert interval(np.array([])) is None
    assert interval(np.array([0.5] * 9)) == (0.5, 0.5)
    empty = summarize([q(0, abstain=True)], [a(abstain=True)])
    assert empty["metrics"]["recall@10"] is None and empty["intervals"]["recall@10"] is None


def test_per_category():
    per = by_category(QUESTIONS, ANSWERS)
    assert list(per) == ["a", "b"]
    assert per["a"]["questions"] == 3 and per["a"]["recall@10"] == pytest.approx(1 / 2)  # questions 0 and 2
    assert per["a"]["abstain_rate"] == 0.0  # question 4 did not abstain
    assert per["b"]["recall@10"] == pytest.approx(1 / 2) and per["b"]["abstain_rate"] == 1.0
    assert per["b"]["intervals"]["abstain_rate"] == (1.0, 1.0) and per["b"]["intervals"]["recall@10"] == (0.5, 0.5)
    low, high = per["a"]["intervals"]["recall@10"]  # questions 0 and 2: 1 and 0
    assert (low, high) == (0.0, 1.0)


def test_wins_and_losses_between_two_configurations():
    better = [a("k1"), a("k2", "k3"), a("k4"), a("x"), a("trap", abstain=True)]
    compared = wins_losses(QUESTIONS, ANSWERS, better)
    # 1: both gold keys, higher; 2: found; 3: did not abstain (a loss); 4: abstained (a win). 0: a tie.
    assert (compared["wins"], compared["losses"], compared["ties"]) == (3, 1, 1)
    assert [(row["position"], row["verdict"]) for row in compared["rows"]] == [
        (3, "loss"),
        (1, "win"),
        (2, "win"),
        (4, "win"),
    ]
    assert compared["rows"][1]["a"]["first_gold_rank"] == 2 and compared["rows"][1]["b"]["first_gold_rank"] == 1
