"""The namespace noise tier: the abstain gate measured on the namespace's own rows (real embedders)."""

import time

import numpy as np
from django.core.management import call_command

from retrieval import caching
from retrieval.gates import probe_corpora, thresholds
from retrieval.store import clickhouse
from tests.test_vector_mirror import agent_org

FACTS = [
    {"memory_key": "sla.enterprise", "value": "Enterprise SLA: first response within 1 hour, 24/7 coverage"},
    {"memory_key": "office.berlin", "value": "The Berlin office is at Torstrasse 12 and opens at 8:30"},
    {"memory_key": "deploy.window", "value": "Production deploys run on Tuesday mornings after the standup"},
    {"memory_key": "team.lead", "value": "Jonas Berg leads the platform team since March"},
    {"memory_key": "backup", "value": "Backups are kept for 35 days in the eu-west bucket"},
    {"memory_key": "oncall", "value": "The on-call rotation changes every Monday at 10:00"},
    {"memory_key": "vpn", "value": "Staff connect to the VPN with their hardware key"},
    {"memory_key": "expenses", "value": "Expenses over 500 euros need a manager's approval"},
]


def test_an_off_topic_question_over_the_models_gate_abstains_on_the_namespaces(local_embedder, agent):
    call_command("recalibrate")
    agent.set(*FACTS)
    reply = agent.search("what is the weather like tomorrow?").json
    gates = reply["thresholds"]
    cluster_gate = thresholds.resolve(agent_org(agent), "default", "local:minilm").abstain
    top = max(hit["similarity"] for hit in reply["hits"])
    assert cluster_gate < top < gates["abstain"]  # the model's gate would have answered
    assert (reply["abstain"], reply["abstain_code"]) == (True, "below_threshold")
    assert gates["abstain_source"] == "namespace_noise" and gates["abstain"] == round(gates["noise_level"] + 0.07, 4)
    answered = agent.search("when do production deploys run?").json
    assert answered["abstain"] is False and answered["hits"][0]["memory_key"] == "deploy.window"


def test_calibration_get_shows_the_noise_level_and_how_it_was_measured(local_embedder, agent):
    call_command("recalibrate")
    agent.set(*FACTS)
    got = agent.call("calibration.get", {"namespace": "default"}, agent.token).json
    measured = got["noise"]
    assert (measured["rows"], measured["probes"]) == (len(FACTS), len(probe_corpora.OFF_TOPIC))
    tops = clickhouse.query_value(
        "SELECT tops FROM namespace_noise FINAL WHERE org = {org:String}", {"org": agent_org(agent)}
    )
    assert measured["level"] == round(float(np.percentile(tops, 90)), 4)
    assert got["abstain_in_force"] == max(got["gates"]["abstain"], measured["abstain"])


def test_the_level_is_measured_again_once_the_namespace_has_grown(local_embedder, agent):
    call_command("recalibrate")
    agent.set(*FACTS[:4])
    assert agent.call("calibration.get", {"namespace": "default"}, agent.token).json["noise"]["rows"] == 4
    agent.set(*FACTS[4:])
    deadline = time.monotonic() + 30
    while True:  # measured again in the background, once the process's copy (60 s) is past
        caching.forget_all()
        rows = agent.call("calibration.get", {"namespace": "default"}, agent.token).json["noise"]["rows"]
        if rows == len(FACTS):
            break
        assert time.monotonic() < deadline, f"still measured on {rows} rows"
        time.sleep(0.05)


def test_a_fake_embedder_keeps_the_scalar_gate(backend, agent):
    agent.set(*FACTS)
    gates = agent.search("what is the weather like tomorrow?").json["thresholds"]
    assert (gates["tier"], gates["abstain_source"], gates["abstain"], gates["noise_level"]) == (
        "scalar",
        "scalar",
        0.30,
        None,
    )
