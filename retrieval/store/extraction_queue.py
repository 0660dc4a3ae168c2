"""The extraction queue: memory.set_from_messages's deferred (or failed) extractions, and the model's work a write
leaves (task `entities`: rows written without entities, for a real model to name theirs; task `conflicts`: rows
that got a conflict verdict, for the conflict resolver), one row per job.

A job names the stored rows to read and whose call it is (the writer who enqueued it). A job's newest revision is
its state: `pending` until a pass extracts its facts (`done`), or fails MAX_ATTEMPTS times (`failed`, visible with
its error to `extraction.list` and the Lab, until retried). A failed attempt is due again after a backoff that
doubles from BACKOFF_S up to BACKOFF_MAX_S. Two passes may take the same due job (two workers, or a worker beside
`extract_pending`): the facts they write are the same rows (`unchanged` the second time), so it costs a call, never
a copy.
"""

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.dispatch import Signal

from retrieval.caching import TtlCache
from retrieval.store import clickhouse
from retrieval.store.rows import next_version
from retrieval.store.tenants import Tenant

PENDING, DONE, FAILED = "pending", "done", "failed"
# A job's task: a conversation's facts, the entities of rows written without, the conflicts rows were written into.
FACTS, ENTITIES, CONFLICTS = "facts", "entities", "conflicts"
job_queued = Signal()  # a job is due now: the server's worker (retrieval/ingest/embed_pending.py) wakes
MAX_ATTEMPTS = 8
BACKOFF_S, BACKOFF_MAX_S = 30.0, 3600.0
_COLUMNS = (
    "org, namespace, job_id, revision, task, state, session_id, turn_keys, agent, user_id, run_id, enqueued_by, attempts, "
    "due_at, error, facts, created_at, updated_at, versions"
)


@dataclass
class Job:
    org: str
    namespace: str
    job_id: str
    revision: int
    task: str
    state: str
    session_id: str
    turn_keys: list[str]
    agent: str
    user_id: str
    run_id: str
    enqueued_by: str
    attempts: int
    due_at: datetime
    error: str
    facts: int
    created_at: datetime
    updated_at: datetime
    versions: list[int]  # an entities or conflicts job: the versions of turn_keys it was queued for

    @property
    def rows(self) -> list[dict]:
        """The row versions an entities or conflicts job was queued for, by identity."""
        return [
            {"memory_key": key, "agent": self.agent, "session_id": self.session_id, "version": version}
            for key, version in zip(self.turn_keys, self.versions)
        ]


def enqueue(
    scope: Tenant,
    session_id: str,
    turn_keys: list[str],
    agent: str,
    user_id: str,
    run_id: str,
    error: str = "",
    task: str = FACTS,
    versions: list[int] | None = None,
) -> str:
    """A job for these stored rows, due now (or, after a failed attempt in the request, after the backoff)."""
    now, job_id = datetime.now(UTC), uuid.uuid4().hex
    attempts = 1 if error else 0
    _save(
        Job(
            scope.org, scope.namespace, job_id, next_version(), task, PENDING, session_id, turn_keys, agent,
            user_id, run_id, scope.subject, attempts, now + _backoff(attempts), error, 0, now, now, versions or [],
        )
    )  # fmt: skip
    if not error:
        job_queued.send(sender=None)
    return job_id


def due(limit: int, org: str | None = None) -> list[Job]:
    """Pending jobs whose time has come, oldest first (of one org, or all)."""
    rows = clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM extraction_queue FINAL
        WHERE state = 'pending' AND due_at <= now64(3, 'UTC')
          AND ({{org:Nullable(String)}} IS NULL OR org = {{org:Nullable(String)}})
        ORDER BY created_at
        LIMIT {{limit:UInt32}}
        """,
        {"org": org, "limit": limit},
        every_org=True,  # a sweep over every org, or the one named
    )
    return [Job(**row) for row in rows]


def finished(job: Job, facts: int) -> None:
    _save(_next(job, state=DONE, facts=facts, error=""))


def failed(job: Job, error: str) -> None:
    """An attempt failed: due again after the backoff, or failed for good past MAX_ATTEMPTS."""
    attempts = job.attempts + 1
    state = FAILED if attempts >= MAX_ATTEMPTS else PENDING
    _save(_next(job, state=state, attempts=attempts, error=error[:2000], due_at=datetime.now(UTC) + _backoff(attempts)))


def retry(scope: Tenant, job_id: str) -> Job | None:
    """A failed (or pending) job of the namespace made due now, its attempts counted afresh (a done job as it is);
    None if the namespace has no such job."""
    rows = clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM extraction_queue FINAL
        WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND job_id = {{job_id:String}}
        """,
        {"org": scope.org, "namespace": scope.namespace, "job_id": job_id},
    )
    if not rows or rows[0]["state"] == DONE:
        return Job(**rows[0]) if rows else None
    job = _next(Job(**rows[0]), state=PENDING, attempts=0, due_at=datetime.now(UTC))
    _save(job)
    job_queued.send(sender=None)
    return job


def jobs(scope: Tenant, state: str | None = None, limit: int = 100) -> list[Job]:
    """The namespace's jobs, newest first (of one state, or all)."""
    rows = clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM extraction_queue FINAL
        WHERE org = {{org:String}} AND namespace = {{namespace:String}}
          AND ({{state:Nullable(String)}} IS NULL OR state = {{state:Nullable(String)}})
        ORDER BY created_at DESC
        LIMIT {{limit:UInt32}}
        """,
        {"org": scope.org, "namespace": scope.namespace, "state": state, "limit": limit},
    )
    return [Job(**row) for row in rows]


# A search reports its scope's pending jobs; asked of the engine at most once a second per namespace, and at once
# after this process queued or finished one.
_pending = TtlCache(1.0)


def pending(org: str, namespaces: list[str]) -> int:
    """The pending extractions of these namespaces: facts on their way, so an empty answer is not evidence of
    absence (an entities job is not counted: its rows are served already)."""
    return sum(_pending.get((clickhouse.target(), org, ns), lambda ns=ns: _count(org, ns)) for ns in namespaces)


def _count(org: str, namespace: str) -> int:
    return clickhouse.query_value(
        """
        SELECT count() FROM extraction_queue FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND state = 'pending' AND task = 'facts'
        """,
        {"org": org, "namespace": namespace},
    )


def _next(job: Job, **changes) -> Job:
    fields = {**job.__dict__, **changes, "revision": next_version(), "updated_at": datetime.now(UTC)}
    return Job(**fields)


def _save(job: Job) -> None:
    clickhouse.insert("extraction_queue", [dict(job.__dict__)])
    _pending.forget()


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=0 if attempts == 0 else min(BACKOFF_S * 2 ** (attempts - 1), BACKOFF_MAX_S))
