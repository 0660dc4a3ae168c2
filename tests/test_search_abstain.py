"""memory.search: the verdict. Every abstain code is reachable, and a confident answer is not an abstain."""

import pytest

from retrieval.search import abstain


def test_a_clear_answer_does_not_abstain(backend, agent):
    agent.set(
        {"memory_key": "deploy", "value": "production deploys run on tuesday mornings"},
        {"memory_key": "food", "value": "the cafeteria serves soup on fridays"},
        {"memory_key": "desk", "value": "hot desks are booked through the portal"},
    )
    reply = agent.search("when do production deploys run").json
    assert (reply["abstain"], reply["abstain_code"], reply["abstain_reason"]) == (False, None, None)
    assert reply["retrieval_risk"] in ("low", "medium") and reply["retrieval_confidence"] > 0.33
    assert reply["hits"][0]["memory_key"] == "deploy" and not reply["hits"][0]["below_threshold"]
    assert reply["thresholds"]["tier"] == "scalar" and reply["thresholds"]["abstain"] == 0.30


def test_no_match_when_nothing_in_scope(backend, agent):
    reply = agent.search("anything at all").json
    assert (reply["abstain"], reply["abstain_code"], reply["retrieval_risk"]) == (True, "no_match", "abstain")
    assert reply["hits"] == [] and reply["candidates_total"] == 0


def test_below_threshold_for_an_off_topic_question(backend, agent):
    agent.set({"memory_key": "deploy", "value": "production deploys run on tuesday mornings"})
    reply = agent.search("quantum chromodynamics lecture").json
    assert (reply["abstain"], reply["abstain_code"], reply["retrieval_risk"]) == (True, "below_threshold", "abstain")
    assert "under the abstain threshold" in reply["abstain_reason"]
    assert all(hit["below_threshold"] for hit in reply["hits"])  # served, but labelled


def test_entity_absent_when_no_memory_names_the_entity(backend, agent):
    agent.set({"memory_key": "acme", "value": "Acme renewed in May", "entities": ["Acme"]})
    reply = agent.search("when did they renew", entity_filter=["Initech"]).json
    assert (reply["abstain"], reply["abstain_code"]) == (True, "entity_absent")
    assert "initech" in reply["abstain_reason"]
    assert (
        agent.search("when did they renew", entity_filter=["Initech", "acme"]).json["abstain_code"] != "entity_absent"
    )


def test_low_calibrated_confidence_when_the_top_hit_does_not_stand_out(backend, agent, settings):
    # Every row equally similar: a top cosine well over the gate, but a flat pool.
    agent.set(*[{"memory_key": f"k{i}", "value": f"deploy window notes {i}"} for i in range(6)])
    settings.LOOM_MEMORY_SEARCH_MIN_CONFIDENCE = 0.6
    reply = agent.search("deploy window notes").json
    assert (reply["abstain"], reply["abstain_code"]) == (True, "low_calibrated_confidence")
    assert reply["retrieval_confidence"] < 0.6 and reply["hits"][0]["similarity"] >= 0.30
    # One row that stands out of the same pool clears the same bar.
    agent.set(
        {"memory_key": "standout", "value": "the staging deploy window is thursday"},
        *[{"memory_key": f"noise{i}", "value": f"cafeteria soup of day {i}"} for i in range(6)],
    )
    clear = agent.search("staging deploy window thursday").json
    assert clear["abstain"] is False and clear["retrieval_confidence"] >= 0.6


def test_page_expired_for_an_unknown_or_expired_handle(backend, agent):
    reply = agent.call("memory.search", {"page": "pg_000000000000000000000000.0"}, agent.token).json
    assert (reply["abstain"], reply["abstain_code"], reply["hits"]) == (True, "page_expired", [])


def test_the_gate_reads_the_pools_best_cosine_or_with_the_setting_rank_one_or_the_window(backend, ranker, settings):
    # Under rrf a lexical-only match can hold rank 1 with a weak cosine while a better cosine sits at rank 2.
    ranker.set(
        {"memory_key": "lookalike", "value": "zebrafish zebrafish"},
        {"memory_key": "holder", "value": "planning notes mention a zebra once among budgets hiring offsites"},
    )
    pool = ranker.search("zebra", search_mode="rrf").json
    assert pool["hits"][0]["memory_key"] == "holder" and pool["hits"][0]["similarity"] < 0.30
    assert pool["abstain"] is False
    settings.LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE = "rank1"
    assert ranker.search("zebra", search_mode="rrf").json["abstain_code"] == "below_threshold"
    settings.LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE = "window"
    assert ranker.search("zebra", search_mode="rrf", top_k=1).json["abstain_code"] == "below_threshold"
    assert ranker.search("zebra", search_mode="rrf", top_k=2).json["abstain"] is False


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "rrf"])
def test_the_verdict_does_not_move_with_top_k(backend, agent, mode):
    """The pool a verdict reads is the same for every window size: 5, 13 and 15 (pools of 50, 52 and 60 rows)."""
    agent.set(
        *[
            {
                "memory_key": f"note.{i:02d}",
                "value": f"note {i}: the team discussed option {i % 7} for the "
                f"{['billing', 'search', 'auth', 'web'][i % 4]} roadmap",
            }
            for i in range(80)
        ]
    )
    for query in ("what did the team discuss about the billing roadmap", "option 3 auth", "quarterly tax filing"):
        verdicts = set()
        for top_k in (5, 13, 15):
            reply = agent.search(query, search_mode=mode, top_k=top_k).json
            verdicts.add(
                (reply["abstain"], reply["abstain_code"], reply["retrieval_risk"], reply["retrieval_confidence"])
            )
        assert len(verdicts) == 1, (query, verdicts)


def test_risk_grades_follow_confidence():
    from retrieval.gates.thresholds import Gates
    from retrieval.search.pool import Candidate
    from retrieval.store.rows import RowId

    gates = Gates("scalar", 0.22, 0.30, 0.38, 0.45, 0.60, 0.85, 0.95)

    def pool(*sims):
        return [Candidate(RowId("n", f"k{i}", "a", "", i), {"value_similarity": sim}) for i, sim in enumerate(sims)]

    strong = pool(0.9, 0.1, 0.1)
    assert abstain.judge(strong, strong, gates, []).risk == "low"
    middling = pool(0.42, 0.33, 0.30)
    assert abstain.judge(middling, middling, gates, []).risk == "medium"
    weak = pool(0.33, 0.30, 0.29)
    verdict = abstain.judge(weak, weak, gates, [])
    assert (verdict.abstain, verdict.risk) == (False, "high")
