"""The recalibration worker: the live embedder probed again every LOOM_RECALIBRATION_INTERVAL_SECONDS (a week),
its gates published as the cluster calibration, so the gates follow an embedder revised behind the same name; a
gate that moves by 0.05 or more is logged as a warning (`calibration.recalibrate`). Each namespace whose
calibration.run kept at least 5 similar and 3 distractor pairs is probed again too, as its org's calls (metered,
switch-checked: a switched-off org's namespace keeps its gates).

It runs in the process that runs the embedding worker (the embedded engine's server: the one process that owns
the data), with LOOM_RECALIBRATION_ENABLED. Fake embedders are never calibrated. A deployment on a ClickHouse
server runs `manage.py recalibrate` on a schedule instead (every replica would probe).
"""

import logging
import threading

from django.conf import settings

from retrieval import caching
from retrieval.gates import calibration, thresholds
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse

log = logging.getLogger(__name__)


class _Worker:
    def __init__(self, target: str):
        self.target, self.stop = target, threading.Event()
        self.ticks = self.passes = 0  # intervals that ended, probes published
        self.thread = threading.Thread(target=self.run, name="loom-recalibration", daemon=True)

    def run(self) -> None:
        clickhouse.use_target_in_thread(self.target)
        try:
            while not self.stop.wait(settings.LOOM_RECALIBRATION_INTERVAL_SECONDS):
                self.ticks += 1
                embedder = get_embedder()
                if not thresholds.adaptive(embedder.model_name):
                    continue
                try:
                    fresh, _, drift = calibration.recalibrate(embedder)
                    probed, held = calibration.reprobe_namespaces(embedder)
                    caching.forget_all()  # this process serves the new gates at once; others within their refresh
                    log.info(
                        "recalibrated %s: %s (largest move %.3f); %d namespaces probed again, %d held",
                        *(embedder.model_name, fresh.calibration_hash, drift, probed, held),
                    )
                    self.passes += 1
                except Exception:  # the worker outlives one failed probe; the gates in force stay
                    log.exception("recalibration failed")
        finally:
            clickhouse.release_thread()


_worker: _Worker | None = None


def start_worker() -> bool:
    """Run the worker in this process when LOOM_RECALIBRATION_ENABLED and the embedded engine serves."""
    global _worker
    if _worker is not None or not settings.LOOM_RECALIBRATION_ENABLED or clickhouse.backend() != "embedded":
        return False
    _worker = _Worker(clickhouse.target())
    _worker.thread.start()
    return True


def progress() -> tuple[int, int]:
    """(intervals that ended, probes published) of this process's worker."""
    return (_worker.ticks, _worker.passes) if _worker else (0, 0)


def stop_worker() -> None:
    global _worker
    if _worker is not None:
        _worker.stop.set()
        _worker.thread.join(timeout=60)
        _worker = None
