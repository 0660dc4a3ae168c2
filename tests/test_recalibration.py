"""The recalibration worker: the server process probes the live embedder again every interval and publishes it."""

import time

import pytest

from retrieval.gates import calibration, recalibration


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
def test_a_fake_embedder_is_never_recalibrated(backend, worker):
    assert worker.start_worker()
    wait_for(lambda: worker.progress()[0] >= 3)
    assert worker.progress()[1] == 0


def test_only_the_embedded_engines_server_runs_it_and_only_when_enabled(backend, worker, settings):
    assert worker.start_worker() is (backend == "embedded")
    worker.stop_worker()
    settings.LOOM_RECALIBRATION_ENABLED = False
    assert worker.start_worker() is False
