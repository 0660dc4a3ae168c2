"""Adaptive thresholds: gates derived from the live embedder's own cosines, in three tiers."""

import io
import time

import pytest
from django.core.management import CommandError, call_command

from retrieval import caching
from retrieval.gates import calibration, probe_corpora
from tests.conftest import Agent

ORDER = ("min_similarity", "abstain", "query_rewrite", "hyde_fallback", "rerank_skip")


def test_the_gates_follow_the_spec_formulas():
    gates = calibration.derive_thresholds(
        paraphrase=[0.6, 0.7, 0.8, 0.9], question_fact=[0.3, 0.4, 0.5, 0.6, 0.7], distractor=[0.0, 0.1, 0.2]
    )
    assert gates["min_similarity"] == pytest.approx(0.18 + 0.02)  # distractor p90 + 0.02
    assert gates["abstain"] == pytest.approx(0.25)
    assert gates["query_rewrite"] == pytest.approx(0.34)  # question-fact p10 beats noise + 0.01
    assert gates["hyde_fallback"] == pytest.approx(0.4) and gates["rerank_skip"] == pytest.approx(0.6)
    assert (gates["conflict"], gates["duplicate"]) == (pytest.approx(0.75), pytest.approx(0.825))
    floored = calibration.derive_thresholds([0.9] * 4, [0.1] * 5, [0.3] * 3)
    assert floored["query_rewrite"] == pytest.approx(0.33) == floored["hyde_fallback"] == floored["rerank_skip"]


def test_the_probe_corpora_hold_forty_pairs_each():
    for corpus in (probe_corpora.PARAPHRASES, probe_corpora.QUESTION_FACT, probe_corpora.DISTRACTORS):
        assert len(corpus) >= 40 and len(set(corpus)) == len(corpus)


def test_recalibrate_derives_ordered_gates_from_the_local_embedder(local_embedder, agent, call, health):
    call_command("recalibrate")
    stored = calibration.stored("local:minilm")
    values = [stored.gates[name] for name in ORDER]
    assert values[0] < values[1] < values[2] <= values[3] <= values[4]
    cos = stored.cosines
    assert min(cos["paraphrase"]) > max(cos["distractor"]) - 0.2
    assert sorted(cos["paraphrase"])[20] > sorted(cos["distractor"])[20] + 0.4  # medians far apart

    shown = agent.call("calibration.get", {}, agent.token).json
    assert (shown["tier"], shown["calibration_hash"]) == ("cluster", stored.calibration_hash)
    assert shown["gates"]["abstain"] == stored.gates["abstain"] and len(shown["distributions"]["distractor"]) >= 40
    reply = agent.search("anything at all")
    assert reply.json["thresholds"]["tier"] == "cluster"
    assert reply.json["thresholds"]["abstain"] == stored.gates["abstain"]
    health = health()["adaptive_thresholds"]
    assert health == {"enabled": True, "tier": "cluster", "calibration_hash": stored.calibration_hash}


def test_the_first_search_without_a_calibration_probes_in_the_background(local_embedder, agent):
    assert agent.search("hello").json["thresholds"]["tier"] == "scalar"  # served at once, not held for the probe
    deadline = time.monotonic() + 60
    while calibration.stored("local:minilm") is None:
        assert time.monotonic() < deadline, "the boot probe did not publish"
        time.sleep(0.05)
    caching.forget_all()
    assert agent.search("hello").json["thresholds"]["tier"] == "cluster"


def test_a_starting_server_probes_before_it_serves(local_embedder, agent):
    """The boot probe (loom_site/wsgi.py): the first search of a fresh deployment judges by the model's gates."""
    from retrieval.gates import thresholds

    thresholds.probe_at_boot()
    stored = calibration.stored("local:minilm")
    assert stored is not None and stored.source == "boot"
    first = agent.search("hello").json["thresholds"]
    assert (first["tier"], first["calibration_hash"]) == ("cluster", stored.calibration_hash)
    thresholds.probe_at_boot()  # the next start finds it stored: no second probe
    assert calibration.stored("local:minilm").created_at == stored.created_at


def test_a_namespace_calibration_overrides_the_cluster(local_embedder, agent, alice, call):
    call_command("recalibrate")
    similar = [list(pair) for pair in probe_corpora.QUESTION_FACT[:6]]
    distractors = [list(pair) for pair in probe_corpora.DISTRACTORS[:4]]
    ran = agent.call("calibration.run", {"similar": similar, "distractors": distractors}, agent.token)
    assert ran.status == 200 and (ran.json["tier"], ran.json["source"]) == ("namespace", "calibration.run")
    assert ran.json["calibration_hash"] != calibration.stored("local:minilm").calibration_hash
    audited = agent.call("audit.list", {}, agent.token).json["entries"][0]
    assert (audited["action"], audited["target"], audited["detail"]) == (
        "calibration.run",
        "default",
        {"similar": 6, "distractors": 4, "paraphrases": 0},
    )
    other = Agent(call, alice.token("admin"), namespace="elsewhere")
    assert other.call("calibration.get", {"namespace": "elsewhere"}, other.token).json["tier"] == "cluster"
    # A later recalibration probes the namespace's kept pairs again with the live embedder.
    out = io.StringIO()
    call_command("recalibrate", stdout=out)
    assert "namespaces probed again from their calibration pairs: 1 (0 held)" in out.getvalue()
    again = agent.call("calibration.get", {}, agent.token).json
    assert (again["tier"], again["source"]) == ("namespace", "recalibrate")


@pytest.mark.parametrize(
    "body,code,field",
    [
        ({"similar": [["a", "b"]] * 4, "distractors": [["a", "b"]] * 3}, "INVALID_VALUE", "similar"),
        ({"similar": [["a", "b"]] * 5, "distractors": [["a"]] * 3}, "INVALID_TYPE", "distractors[0]"),
        ({"similar": [["a", "b"]] * 5}, "MISSING_FIELD", "distractors"),
        ({"similar": "a,b", "distractors": [["a", "b"]] * 3}, "INVALID_TYPE", "similar"),
        (
            {"similar": [["a", "b"]] * 5, "distractors": [["a", "b"], ["c", "c"], ["d", "e"]]},
            "INVALID_VALUE",
            "distractors[1]",
        ),
    ],
)
def test_calibration_run_names_the_bad_field(backend, agent, body, code, field):
    reply = agent.call("calibration.run", body, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, code, field)


def test_a_fake_embedder_keeps_the_scalar_gates(backend, agent, alice):
    shown = agent.call("calibration.get", {}, agent.token).json
    assert (shown["adaptive"], shown["tier"], shown["calibration_hash"]) == (False, "scalar", None)
    assert shown["gates"]["abstain"] == 0.30 and shown["gates"]["min_similarity"] == 0.22
    pairs = {"similar": [["a", "b"]] * 5, "distractors": [["a", "b"]] * 3}
    assert agent.call("calibration.run", pairs, agent.token).error == "CALIBRATION_UNAVAILABLE"
    assert agent.call("calibration.run", pairs, alice.token("writer")).error == "ROLE_FORBIDDEN"
    with pytest.raises(CommandError, match="scalar gates"):
        call_command("recalibrate")


SLA_TIERS = [
    {
        "memory_key": "sla.enterprise",
        "value": "Enterprise SLA: first response within 1 hour, resolution within 8 hours",
    },
    {"memory_key": "sla.growth", "value": "Growth SLA: first response within 4 hours, resolution within 24 hours"},
    {"memory_key": "sla.starter", "value": "Starter SLA: first response within 24 hours, resolution within 72 hours"},
]
QUESTION_ANSWER = [
    ["What is the Enterprise SLA?", "Enterprise SLA: first response within 1 hour"],
    ["Where is the Berlin office?", "The Berlin office is at Torstrasse 12"],
    ["Who leads the platform team?", "Jonas Berg leads the platform team"],
    ["When do production deploys run?", "Production deploys run on Tuesday mornings"],
    ["How long are backups kept?", "Backups are kept for 35 days"],
    ["Which editor theme does Lena prefer?", "Lena prefers a dark theme in the editor"],
]
UNRELATED = [
    ["What is the Enterprise SLA?", "The cafeteria serves soup on Fridays"],
    ["Where is the Berlin office?", "Backups are kept for 35 days"],
    ["Who leads the platform team?", "Production deploys run on Tuesday mornings"],
]


def test_question_answer_pairs_never_set_the_write_gates(local_embedder, agent):
    """calibration.run with question -> answer pairs sets the trigger gates; the write gates stay the model's, so
    three SLA tiers stay three rows, and the Growth question gets the Growth row."""
    call_command("recalibrate")
    cluster = calibration.stored("local:minilm").gates
    ran = agent.call("calibration.run", {"similar": QUESTION_ANSWER, "distractors": UNRELATED}, agent.token).json
    assert ran["tier"] == "namespace" and ran["inherited"] == ["conflict", "duplicate"]
    assert (ran["gates"]["conflict"], ran["gates"]["duplicate"]) == (cluster["conflict"], cluster["duplicate"])
    assert ran["gates"]["query_rewrite"] != cluster["query_rewrite"]  # the pairs did set what they support
    written = agent.set(*SLA_TIERS).json["items"]
    assert [item["duplicate_of"] for item in written] == [None, None, None]
    assert agent.hits("What is the Growth SLA first-response time?")[0] == "sla.growth"


def test_paraphrase_pairs_set_the_write_gates(local_embedder, agent):
    call_command("recalibrate")
    paraphrases = [list(pair) for pair in probe_corpora.PARAPHRASES[:6]]
    ran = agent.call(
        "calibration.run",
        {"similar": QUESTION_ANSWER, "distractors": UNRELATED, "paraphrases": paraphrases},
        agent.token,
    ).json
    assert ran["inherited"] == [] and ran["gates"]["duplicate"] != calibration.stored("local:minilm").gates["duplicate"]
