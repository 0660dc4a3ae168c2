"""The embedding worker: rows, session digests and entity summaries stored unembedded (their org's model calls
were off) get their vectors; and, in the server's process, the extraction queue is drained (deferred
memory.set_from_messages and the entity extractor: retrieval/ingest/extraction_pass.py; `manage.py
extract_pending` on a ClickHouse server).

`python manage.py embed_pending` runs one pass (or `--loop`). Work is chosen
in the query: an org whose model calls are still off is left out, so its rows
spend nothing and do not crowd the batch; the newest stubs go first.

With the embedded engine one process owns the data, so the command cannot run
beside the server: the server runs the worker in a thread instead
(`start_worker`, LOOM_EMBEDDING_WORKER), a pass when it starts, whenever an
org's model calls come back on, and every LOOM_EMBEDDING_WORKER_INTERVAL_S. Being the one process that
maintains the data, it also sweeps what failed writes left behind every LOOM_REPAIR_INTERVAL_S
(retrieval/ingest/repair.py: one sweep at a time; a ClickHouse server's deployments run `loom_repair` on a
schedule).
"""

import logging
import threading
import time

from django.conf import settings
from django.dispatch import receiver

from retrieval.ingest import digests, entities, extraction_pass, passes, repair, write
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse, extraction_queue
from tenancy.access import Scope

log = logging.getLogger(__name__)

ACTOR = "process:embed_pending"


def pending(batch_size: int, org: str | None = None) -> list[dict]:
    """Live rows of the served model whose vectors are still stubs, newest first."""
    return clickhouse.query(
        """
        SELECT org, namespace, memory_key, agent, session_id, version, user_id FROM memory_embeddings
        WHERE embedding_model = {model:String} AND embedding_dim = 0 AND status = 'active'
          AND org NOT IN {off:Array(String)} AND ({org:Nullable(String)} IS NULL OR org = {org:Nullable(String)})
          AND (org, namespace, memory_key, agent, session_id, version) NOT IN (
              SELECT org, namespace, memory_key, agent, session_id, version FROM memory_embeddings
              WHERE embedding_model = {model:String} AND (embedding_dim > 0 OR status != 'active'))
        ORDER BY version DESC
        LIMIT {batch:UInt32}
        """,
        {
            "model": get_embedder().model_name,
            "off": sorted(customer.switched_off_orgs()),
            "org": org,
            "batch": batch_size,
        },
        every_org=True,  # a sweep over every org, or the one named
    )


def run_once(batch_size: int = 100, org: str | None = None) -> int:
    """One pass: embed up to `batch_size` stubs, one call per namespace and writer (retrieval/ingest/passes.py),
    for the writer; how many were embedded.

    A refusal (customer.HOLDS: the switch, a copy of it too old to trust, the gateway refusing or deferring an
    identity) holds that work: its stubs stay for a later pass and the other writers' go on.
    """
    try:
        rows = pending(batch_size * passes.READ_AHEAD, org)
        off = customer.switched_off_orgs()
        done = digests.embed_missing(batch_size, off, ACTOR, org) + entities.embed_missing(batch_size, off, ACTOR, org)
    except customer.SwitchUnread as exc:
        log.warning("embed_pending holds: %s", exc)
        return 0

    def embed(scope: Scope, group: list[dict]) -> int:
        return write.embed_stubs(scope, [(r["memory_key"], r["agent"], r["session_id"], r["version"]) for r in group])

    return done + passes.each_writer(rows, "embed_pending", ACTOR, embed, "stubs", batch_size, passes.writers(rows))[0]


class _Worker:
    def __init__(self, target: str):
        self.target = target
        self.wake, self.stop = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run, name="loom-embed-pending", daemon=True)
        self.sweep_at = time.monotonic() + settings.LOOM_REPAIR_INTERVAL_S

    def run(self) -> None:
        clickhouse.use_target_in_thread(self.target)
        try:
            while not self.stop.is_set():
                for drain in (run_once, extraction_pass.run_due):
                    try:
                        while drain() and not self.stop.is_set():  # drain, then wait
                            pass
                    except Exception:  # the worker outlives one failed pass
                        log.exception("worker pass (%s) failed", drain.__qualname__)
                self.sweep_when_due()
                self.wake.wait(settings.LOOM_EMBEDDING_WORKER_INTERVAL_S)
                self.wake.clear()
        finally:
            clickhouse.release_thread()

    def sweep_when_due(self) -> None:
        if time.monotonic() < self.sweep_at:
            return
        self.sweep_at = time.monotonic() + settings.LOOM_REPAIR_INTERVAL_S
        try:
            if swept := repair.sweep():
                log.info("swept %d row versions failed writes left behind", swept)
        except Exception:  # the next interval tries again
            log.exception("repair sweep failed")


_worker: _Worker | None = None


def start_worker() -> bool:
    """Run the embedding worker in this process (the server's), when LOOM_EMBEDDING_WORKER says so: `auto` runs it
    on the embedded engine only (a ClickHouse server's deployments run `embed_pending --loop` as its own process)."""
    global _worker
    wanted = settings.LOOM_EMBEDDING_WORKER
    if _worker is not None or wanted == "off" or (wanted == "auto" and clickhouse.backend() != "embedded"):
        return False
    _worker = _Worker(clickhouse.target())
    _worker.thread.start()
    return True


@receiver(customer.model_calls_switched)
@receiver(extraction_queue.job_queued)
def wake(sender=None, enabled: bool = True, **_) -> None:
    """An org's model calls came back on (its stubs are embedded now), or an extraction was queued (it runs now):
    not at the next interval."""
    if enabled and _worker is not None:
        _worker.wake.set()


def stop_worker() -> None:
    global _worker
    if _worker is not None:
        _worker.stop.set()
        _worker.wake.set()
        _worker.thread.join(timeout=30)
        _worker = None
