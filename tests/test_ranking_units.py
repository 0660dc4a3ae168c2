"""Fusion, rank terms, window and verdict as pure functions: no engine, no write, milliseconds each.

The same behaviour is asserted end to end on both engines elsewhere; these pin the arithmetic.
"""

from datetime import UTC, datetime, timedelta

import pytest

from retrieval import knobs
from retrieval.gates.thresholds import Gates
from retrieval.knobs import RRF_K
from retrieval.language.query import analyse
from retrieval.search import abstain, fusion, mentions, rank, window
from retrieval.search.plan import SearchRequest, resolve
from retrieval.search.pool import Candidate
from retrieval.store.rows import RowId

GATES = Gates("scalar", 0.22, 0.30, 0.38, 0.45, 0.60, 0.85, 0.95)
DAY = datetime(2026, 1, 1, tzinfo=UTC)


def candidate(key: str, similarity: float, lexical: float = 0.0, days: int = 0, session: str = "") -> Candidate:
    c = Candidate(
        RowId("n", key, "a", session, 1), {"value_similarity": similarity, **({"lexical": lexical} if lexical else {})}
    )
    c.meta = {
        "memory_type": "fact",
        "tags": [],
        "category": "",
        "entities": [],
        "source_class": "asserted",
        "confidence": 0.0,
        "sensitivity": "low",
        "dated_at": DAY + timedelta(days=days),
    }
    return c


def plan_for(query: str, **fields):
    request = SearchRequest(query=query, **fields)
    shape = analyse(query, DAY)
    return request, shape, resolve(request, {}, shape)


def ranked(query: str, candidates: list[Candidate], **fields) -> list[str]:
    request, shape, plan = plan_for(query, **fields)
    scale = fusion.fuse(candidates, plan)
    rank.apply(candidates, scale, rank.Inputs(plan, request, shape, shape.date, {}, []))
    return [c.id.memory_key for c in rank.order(candidates)]


def test_hybrid_is_alpha_lexical_plus_the_rest_cosine():
    rows = [candidate("words", 0.40, lexical=1.0), candidate("meaning", 0.70)]
    assert ranked("kafka retention", rows, search_mode="hybrid", alpha=0.25) == ["words", "meaning"]
    assert rows[0].relevance == pytest.approx(0.25 * 1.0 + 0.75 * 0.40)
    assert ranked(
        "kafka retention",
        [candidate("words", 0.40, lexical=1.0), candidate("meaning", 0.70)],
        search_mode="hybrid",
        alpha=0.1,
    ) == ["meaning", "words"]


def test_rrf_sums_reciprocal_ranks_of_both_orders():
    rows = [candidate("both", 0.5, lexical=1.0), candidate("cosine", 0.9), candidate("words", 0.1, lexical=0.5)]
    assert ranked("x", rows, search_mode="rrf") == ["both", "words", "cosine"]  # two orders beat one
    assert rows[0].relevance == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))  # 2nd by cosine, 1st by words


def test_a_recency_cue_orders_the_near_ties_by_date_and_leaves_the_rest():
    rows = [candidate("old", 0.60, days=0), candidate("new", 0.52, days=30), candidate("far", 0.30, days=60)]
    assert ranked("the latest report", rows) == ["new", "old", "far"]  # far is newest but not a near-tie
    assert ranked("the first report", [candidate("old", 0.55, days=0), candidate("new", 0.60, days=30)]) == [
        "old",
        "new",
    ]


def test_a_named_day_lifts_that_days_rows():
    rows = [candidate("that-day", 0.40, days=9), candidate("other", 0.50, days=40)]
    assert ranked("what happened on 2026-01-10", rows) == ["that-day", "other"]
    assert rows[0].components["date"] == knobs.DATE and rows[1].components["date"] == 0.0


def test_the_window_caps_rows_per_key_and_puts_rows_under_the_floor_last():
    _, _, plan = plan_for("x", top_k=3)
    rows = [
        candidate("k", 0.9, session="s1"),
        candidate("k", 0.8, session="s2"),
        candidate("k", 0.7, session="s3"),
        candidate("weak", 0.1),
        candidate("other", 0.5),
    ]
    served = window.shape(rows, plan, floor=0.22)
    assert [(c.id.memory_key, c.below_threshold) for c in served] == [("k", False), ("k", False), ("other", False)]


def test_the_verdict_reads_the_pools_best_cosine_not_rank_one():
    rows = [candidate("lexical-rank-1", 0.10), candidate("better", 0.80)] + [candidate(f"n{i}", 0.2) for i in range(9)]
    verdict = abstain.judge(rows, rows[:2], GATES, [], mentions.Check())
    assert not verdict.abstain and verdict.top_similarity == 0.80


def test_verdict_codes_in_order():
    rows = [candidate("a", 0.9)]
    assert abstain.judge([], [], GATES, [], mentions.Check(["Gina"], [])).code == "no_match"
    assert abstain.judge(rows, rows, GATES, [], mentions.Check(["Gina"], [])).code == "entity_absent"
    assert abstain.judge(rows, rows, GATES, [], mentions.Check(["Gina", "Jon"], ["Jon"])).abstain is False
    weak = [candidate("a", 0.25)]
    assert abstain.judge(weak, weak, GATES, [], mentions.Check()).code == "below_threshold"
    unstated = mentions.Check(["Gina"], ["Gina"], ["dessert", "recipe"], [])
    assert abstain.judge(weak, weak, GATES, [], unstated).code == "below_threshold"  # the spec's code, where it fits
    weak_pass = [candidate("a", 0.35)]  # over the abstain gate (0.30), under the weak-pass one (query_rewrite 0.38)
    assert abstain.judge(weak_pass, weak_pass, GATES, [], unstated).code == "content_absent"
    assert abstain.judge(rows, rows, GATES, [], unstated).abstain is False  # a strong pass may say it in other words


def test_a_word_no_memory_holds_costs_the_risk_a_grade():
    rows = [candidate("a", 0.9)] + [candidate(f"n{i}", 0.2) for i in range(9)]
    held = mentions.Check([], [], ["dessert", "recipe"], ["dessert", "recipe"])
    one = mentions.Check([], [], ["dessert", "recipe"], ["recipe"])
    two = mentions.Check([], [], ["dessert", "recipe"], [])
    risks = [abstain.judge(rows, rows, GATES, [], check).risk for check in (held, one, two)]
    assert risks == ["low", "medium", "medium"]  # two on a strong pass: served, a grade worse as one
    flat = [candidate(f"f{i}", 0.4) for i in range(10)]  # high already: a grade worse is still high
    assert [abstain.judge(flat, flat, GATES, [], check).risk for check in (held, one)] == ["high", "high"]


@pytest.mark.parametrize(
    "query, subject, ordinal",
    [
        ("What is the latest version of the billing service?", ["version", "bill", "servic"], True),
        ("the most recent deploy of web-app", ["deploy", "web", "app"], True),
        ("When did Melanie first go camping?", ["melani", "go", "camp"], True),
        ("What did Melanie paint recently?", ["melani", "paint"], False),  # the present, not an order
        ("the first-response times", ["first", "respons", "time"], False),  # a word, not a cue
    ],
)
def test_an_ordinal_cue_and_the_subject_it_orders(query, subject, ordinal):
    shape = analyse(query, DAY)
    assert (shape.subject, shape.ordinal) == (subject, ordinal)


def test_an_ordinal_cue_orders_the_subjects_rows_by_date_wherever_fusion_placed_them():
    rows = [candidate("close-old", 0.80, days=0), candidate("far-new", 0.30, days=30), candidate("other", 0.75)]
    request, shape, plan = plan_for("the latest billing version", search_mode="semantic")
    scale = fusion.fuse(rows, plan)
    subject = frozenset({rows[0].id, rows[1].id})
    rank.apply(rows, scale, rank.Inputs(plan, request, shape, shape.date, {}, [], subject))
    assert [c.id.memory_key for c in rank.order(rows)] == ["far-new", "close-old", "other"]
