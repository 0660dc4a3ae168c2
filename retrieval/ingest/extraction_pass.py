"""A pass over the extraction queue: each due job run by its task's runner, as the writer who queued it.

`facts`: a conversation's deferred (or failed) extraction (retrieval/ingest/conversation.py); `entities`: rows
written without entities, for a real model to name theirs (retrieval/ingest/entity_extractor.py); `conflicts`: rows
that got a conflict verdict, for the model to judge (retrieval/ingest/conflict_resolver.py). A runner that
fails as a model call can (FAILURES) leaves what is stored as it is and the job to the queue's backoff. The
server's worker runs passes on the embedded engine (retrieval/ingest/embed_pending.py); `manage.py extract_pending`
beside a ClickHouse server.
"""

import logging

from retrieval.ingest import conflict_resolver, conversation, entity_extractor
from retrieval.providers import customer
from retrieval.store import extraction_queue
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)

# Each task: the op its model calls are metered as, and its runner (the rows it wrote).
TASKS = {
    extraction_queue.FACTS: (conversation.OP, conversation.extract_job),
    extraction_queue.ENTITIES: ("entity_extractor", entity_extractor.run_job),
    extraction_queue.CONFLICTS: ("conflict_resolver", conflict_resolver.run_job),
}


def run_due(limit: int = 20, org: str | None = None) -> int:
    """Run the due jobs of the queue (of one org, or all); how many were tried."""
    jobs = extraction_queue.due(limit, org)
    for job in jobs:
        scope = Scope(org=job.org, namespace=job.namespace, role=Role.WRITER, subject=job.enqueued_by)
        op, runner = TASKS[job.task]
        try:
            with customer.for_org(job.org, job.namespace, job.enqueued_by, op, job.user_id):
                written = runner(scope, job)
        except conversation.FAILURES as exc:
            log.warning("%s job %s of %s/%s failed: %s", job.task, job.job_id, job.org, job.namespace, exc)
            extraction_queue.failed(job, f"{type(exc).__name__}: {exc}")
            continue
        extraction_queue.finished(job, written)
    return len(jobs)
