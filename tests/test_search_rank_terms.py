"""memory.search: each rank term decides a near-tie, and none outranks clear relevance."""

import pytest

from retrieval import knobs
from tests import events

SAME = "the quarterly report is due on friday"


def order(reply):
    return [hit["memory_key"] for hit in reply.json["hits"]]


def components(reply):
    return {hit["memory_key"]: hit["score_components"] for hit in reply.json["hits"]}


def test_entity_boost_is_half_the_share_of_entity_filter_carried(backend, ranker):
    ranker.set(
        {"memory_key": "one", "value": SAME, "entities": ["Acme"]},
        {"memory_key": "both", "value": SAME, "entities": ["Acme", "Globex"]},
    )
    reply = ranker.search("quarterly report", entity_filter=["acme", "Globex"], explain=True)
    assert order(reply) == ["both", "one"]
    assert components(reply)["both"]["entity_boost"] == 0.5 and components(reply)["one"]["entity_boost"] == 0.25


def test_a_recency_cue_lifts_the_newest_and_a_first_cue_the_oldest(backend, ranker):
    ranker.set(
        {"memory_key": "old", "value": SAME, "valid_at": "2024-01-01T00:00:00Z"},
        {"memory_key": "new", "value": SAME, "valid_at": "2025-01-01T00:00:00Z"},
    )
    latest = ranker.search("what is the latest quarterly report", explain=True)
    assert order(latest) == ["new", "old"] and components(latest)["new"]["recency"] == knobs.RECENCY
    first = ranker.search("what was the first quarterly report", explain=True)
    assert order(first) == ["old", "new"] and components(first)["old"]["chronology"] == knobs.RECENCY


def test_first_inside_a_compound_word_is_no_chronology_cue(backend, ranker):
    ranker.set(
        {"memory_key": "old", "value": SAME, "valid_at": "2024-01-01T00:00:00Z"},
        {"memory_key": "new", "value": SAME, "valid_at": "2025-01-01T00:00:00Z"},
    )
    reply = ranker.search("the first-response quarterly report", explain=True)
    assert all("chronology" not in c and "recency" not in c for c in components(reply).values())


@pytest.mark.parametrize(
    "mode", [None, "semantic", "rrf", "hybrid", "bm25_hybrid", "lexical", "graph", "temporal", "related"]
)
def test_the_latest_deploy_of_a_service_is_served_first(backend, agent, mode):
    """Forty deploy events: the newest of the service's deploys comes first, whatever else the pool holds, in every
    mode: the rows holding every word the question asks about are ordered by date wherever fusion placed them."""
    agent.set(*events.deploys())
    newest = max((e for e in events.deploys() if "billing-service" in e["value"]), key=lambda e: e["valid_at"])
    asked = {"search_mode": mode} if mode else {}
    assert agent.hits("What was the latest deploy of billing-service?", **asked)[0] == newest["memory_key"]
    oldest = min((e for e in events.deploys() if "billing-service" in e["value"]), key=lambda e: e["valid_at"])
    assert agent.hits("What was the first deploy of billing-service?", **asked)[0] == oldest["memory_key"]


@pytest.mark.parametrize("mode", [None, "hybrid", "lexical"])
def test_a_dated_question_finds_that_dates_rows(backend, agent, mode):
    """The date is read in every mode: its rows are pulled into the pool and lifted."""
    agent.set(*events.deploys())
    asked = {"search_mode": mode} if mode else {}
    on_the_day = [e["memory_key"] for e in events.deploys() if e["valid_at"].startswith("2026-04-15")]
    assert on_the_day and agent.hits("What happened on 2026-04-15?", **asked)[0] == on_the_day[0]
    assert agent.hits("What happened on 15 April 2026?", **asked)[0] == on_the_day[0]


def test_a_date_in_the_question_lifts_rows_anchored_near_it(backend, ranker):
    ranker.set(
        {"memory_key": "march", "value": SAME, "valid_at": "2024-03-02T00:00:00Z"},
        {"memory_key": "july", "value": SAME, "valid_at": "2024-07-02T00:00:00Z"},
    )
    reply = ranker.search("quarterly report on 2 March 2024", explain=True)
    assert order(reply) == ["march", "july"]
    assert components(reply)["march"]["date"] == knobs.DATE and components(reply)["july"]["date"] == 0.0


def test_confidence_prior_orders_equal_rows(backend, ranker):
    ranker.set(
        {"memory_key": "sure", "value": SAME, "confidence": 0.9},
        {"memory_key": "unsure", "value": SAME, "confidence": 0.2},
    )
    reply = ranker.search("quarterly report", explain=True)
    assert order(reply) == ["sure", "unsure"]
    assert components(reply)["sure"]["confidence_prior"] == pytest.approx(0.09)
    assert (
        ranker.search("quarterly report", confidence_weight=0, explain=True).json["hits"][0]["score_components"][
            "prior"
        ]
        == 0
    )


def test_tags_soft_and_category_soft_boost_without_filtering_and_the_prior_group_is_capped(backend, ranker, settings):
    ranker.set(
        {"memory_key": "plain", "value": SAME, "confidence": 0.5},
        {"memory_key": "tagged", "value": SAME, "confidence": 0.5, "tags": ["finance"], "category": "reports"},
    )
    reply = ranker.search("quarterly report", tags_soft=["finance"], category_soft="reports", explain=True)
    assert order(reply) == ["tagged", "plain"]
    tagged = components(reply)["tagged"]
    assert (tagged["tag_boost"], tagged["category_boost"]) == (0.05, 0.05)
    assert tagged["prior"] == pytest.approx(0.15)  # 0.05 + 0.05 + 0.05, at the cap
    settings.LOOM_MEMORY_PRIOR_CAP = 0.08
    capped = components(ranker.search("quarterly report", tags_soft=["finance"], category_soft="reports", explain=True))
    assert capped["tagged"]["prior"] == pytest.approx(0.08) and capped["plain"]["prior"] == pytest.approx(0.05)


def test_reinforcement_lifts_used_rows_and_harm_takes_it_back_but_never_below_relevance(backend, ranker, call):
    ranker.set({"memory_key": "a", "value": SAME}, {"memory_key": "b", "value": SAME})
    assert order(ranker.search("quarterly report")) == ["a", "b"]  # the name breaks the tie
    outcome = call("memory.outcome", {"memory_keys": ["b"], "outcome": "positive"}, ranker.token)
    assert outcome.status == 200 and outcome.json["recorded"] == 1
    lifted = ranker.search("quarterly report", explain=True)
    assert order(lifted) == ["b", "a"]
    assert components(lifted)["b"]["reinforcement"] == pytest.approx(0.15 * (1 - 2.718281828**-1), abs=1e-4)
    call("memory.outcome", {"memory_keys": ["b"], "outcome": "harm", "weight": 5}, ranker.token)
    harmed = ranker.search("quarterly report", explain=True)
    assert components(harmed)["b"]["reinforcement"] == 0.0  # taken back, not negative
    assert components(harmed)["b"]["rank_score"] == pytest.approx(components(harmed)["a"]["rank_score"])


def test_trust_weight_is_off_by_default_and_orders_by_provenance_when_set(backend, ranker, settings):
    ranker.set(
        {"memory_key": "external", "value": SAME, "source_class": "external"},
        {"memory_key": "stated", "value": SAME, "source_class": "asserted"},
    )
    assert "trust" not in components(ranker.search("quarterly report", explain=True))["stated"]
    settings.LOOM_MEMORY_SEARCH_TRUST_WEIGHT = 0.1
    reply = ranker.search("quarterly report", explain=True)
    assert order(reply) == ["stated", "external"]
    assert components(reply)["stated"]["trust"] == 0.05 and components(reply)["external"]["trust"] == -0.1


def test_demote_tags_sinks_a_row_to_the_bottom_without_dropping_it(backend, ranker):
    ranker.set(
        {"memory_key": "best", "value": "quarterly report due friday", "tags": ["stale"]},
        {"memory_key": "worse", "value": "weekly standup notes"},
    )
    assert order(ranker.search("quarterly report due friday")) == ["best", "worse"]
    reply = ranker.search("quarterly report due friday", demote_tags=["stale"], explain=True)
    assert order(reply) == ["worse", "best"] and components(reply)["best"]["demoted"] == -10.0


def test_sensitive_rows_are_lowered_unless_the_query_asks_for_a_contact_detail(backend, ranker):
    ranker.set(
        {"memory_key": "private", "value": "dana's phone number and email", "sensitivity": "medium"},
        {"memory_key": "public", "value": "dana's phone number and email"},
    )
    reply = ranker.search("dana's number", explain=True)
    assert order(reply) == ["public", "private"]
    assert components(reply)["private"]["sensitivity_demotion"] == -0.1
    asked = ranker.search("what is dana's phone", explain=True)
    assert "sensitivity_demotion" not in components(asked)["private"]
    assert order(ranker.search("dana's IBAN")) == ["private", "public"]


def test_personalization_none_drops_every_user_derived_term(backend, ranker, call):
    ranker.set({"memory_key": "a", "value": SAME, "confidence": 0.1}, {"memory_key": "b", "value": SAME, "tags": ["t"]})
    call("memory.outcome", {"memory_keys": ["a"], "outcome": "positive", "weight": 3}, ranker.token)
    default = components(ranker.search("quarterly report", tags_soft=["t"], explain=True))
    assert default["a"]["reinforcement"] > 0 and default["b"]["prior"] > 0
    plain = ranker.search("quarterly report", tags_soft=["t"], personalization="none", explain=True)
    for parts in components(plain).values():
        assert not {"prior", "reinforcement", "confidence_prior", "tag_boost"} & set(parts)
        assert parts["rank_score"] == pytest.approx(parts["relevance"], abs=1e-6)


def test_source_classes_outside_the_eligible_list_earn_no_priors(backend, ranker, settings):
    settings.LOOM_MEMORY_SEARCH_SOURCE_CLASS_BOOST_ELIGIBLE = ["asserted", "observed"]
    ranker.set(
        {"memory_key": "inferred", "value": SAME, "source_class": "extracted"},
        {"memory_key": "stated", "value": SAME, "confidence": 0.3},
    )
    reply = ranker.search("quarterly report", explain=True)
    assert "prior" not in components(reply)["inferred"] and components(reply)["stated"]["prior"] > 0
    assert order(reply) == ["stated", "inferred"]


def test_key_match_breaks_a_tie_by_the_stemmed_key(backend, ranker):
    ranker.set({"memory_key": "misc.note", "value": SAME}, {"memory_key": "report.quarterly", "value": SAME})
    reply = ranker.search("quarterly report", explain=True)
    assert order(reply) == ["report.quarterly", "misc.note"]
    assert components(reply)["report.quarterly"]["key_match"] == pytest.approx(0.01)


def test_pinned_is_not_a_rank_term(backend, ranker):
    ranker.set({"memory_key": "a", "value": SAME}, {"memory_key": "b", "value": SAME, "pinned": True})
    reply = ranker.search("quarterly report", explain=True)
    assert order(reply) == ["a", "b"]
    assert components(reply)["a"]["rank_score"] == components(reply)["b"]["rank_score"]


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "bm25_hybrid", "rrf"])
def test_maximal_priors_and_reinforcement_never_lift_a_less_relevant_row_over_a_clearly_more_relevant_one(
    backend, ranker, call, mode
):
    ranker.set(
        {
            "memory_key": "relevant",
            "value": "the quarterly finance report is due on friday",
            "confidence": 0.0,
            "source_class": "external",
        },
        {
            "memory_key": "boosted",
            "value": "lunch menu for the offsite",
            "confidence": 1.0,
            "tags": ["t"],
            "category": "c",
        },
    )
    for _ in range(5):
        call("memory.outcome", {"memory_keys": ["boosted"], "outcome": "positive", "weight": 10}, ranker.token)
    reply = ranker.search(
        "quarterly finance report due friday", search_mode=mode, tags_soft=["t"], category_soft="c", explain=True
    )
    parts = components(reply)
    assert parts["boosted"]["reinforcement"] == pytest.approx(0.15, abs=1e-3)  # saturated
    assert parts["boosted"]["prior"] == pytest.approx(0.15)  # at the cap
    assert order(reply)[0] == "relevant"


def test_a_known_entity_the_question_names_lifts_rows_carrying_it(backend, ranker):
    ranker.set(
        {"memory_key": "a", "value": SAME, "entities": ["Marketing"]},
        {"memory_key": "b", "value": SAME, "entities": ["Dana"]},
    )
    reply = ranker.search("what did Dana say about the quarterly report", explain=True)
    assert reply.json["query_entities"] == ["dana"]
    assert order(reply) == ["b", "a"]
    assert components(reply)["b"]["query_entity_boost"] == 0.1 and components(reply)["a"]["query_entity_boost"] == 0.0
    fast = ranker.search("what did Dana say about the quarterly report", retrieval_budget="fast", explain=True)
    assert fast.json["query_entities"] == [] and "query_entity_boost" not in components(fast)["b"]
