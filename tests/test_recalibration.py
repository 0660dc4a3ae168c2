"""The recalibration worker: the server process probes the live embedder again every interval and publishes it."""

import time

import pytest

from retrieval.gates import calibration, probe_corpora, recalibration
from retrieval.store import clickhouse
from tests.conftest import Agent


@pytest.fixture
def worker(settings):
    settings.LOOM_RECALIBRATION_INTERVAL_SECONDS = 0.1
    yield recalibration
    recalibration.stop_worker()


def wait_for(condition, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the recalibration worker did not get there"
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_the_worker_publishes_a_fresh_calibration_of_the_live_embedder(backend, local_embedder, worker):
    assert calibration.stored(local_embedder.model_name) is None
    assert worker.start_worker()
    wait_for(lambda: worker.progress()[1] >= 1)
    published = calibration.stored(local_embedder.model_name)
    assert published is not None and published.source == "recalibrate"


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_the_worker_probes_a_namespaces_calibration_pairs_again_unless_its_org_is_switched_off(
    backend, local_embedder, worker, alice, bob, call
):
    similar = [list(pair) for pair in probe_corpora.QUESTION_FACT[:6]]
    distractors = [list(pair) for pair in probe_corpora.DISTRACTORS[:4]]
    alices, bobs = Agent(call, alice.token("admin")), Agent(call, bob.token("admin"))
    for who in (alices, bobs):
        ran = who.call("calibration.run", {"similar": similar, "distractors": distractors}, who.token)
        assert ran.status == 200 and ran.json["source"] == "calibration.run"
    bobs.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, bobs.token)
    assert worker.start_worker()
    wait_for(lambda: worker.progress()[1] >= 1)
    assert calibration.namespace_stored(alice.name, "default", local_embedder.model_name).source == "recalibrate"
    assert calibration.namespace_stored(bob.name, "default", local_embedder.model_name).source == "calibration.run"
    clickhouse.flush_later()  # usage rows are written off the request path
    spent = clickhouse.query_rows(
        "SELECT org, embedding_calls FROM agent_events WHERE op = 'recalibrate' AND org IN {orgs:Array(String)}",
        {"orgs": [alice.name, bob.name]},
    )
    assert spent and {org for org, _ in spent} == {alice.name}  # metered to the org it probed for


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_fake_embedder_is_never_recalibrated(backend, worker):
    assert worker.start_worker()
    wait_for(lambda: worker.progress()[0] >= 3)
    assert worker.progress()[1] == 0


def test_only_the_embedded_engines_server_runs_it_and_only_when_enabled(backend, worker, settings):
    assert worker.start_worker() is (backend == "embedded")
    worker.stop_worker()
    settings.LOOM_RECALIBRATION_ENABLED = False
    assert worker.start_worker() is False
