"""The ops that write memory: rows, conversations, session digests, entity summaries, typed records, deletes, an
extraction's retry and a search's outcome."""

from drf_spectacular.utils import PolymorphicProxySerializer

from memories import inputs, outputs
from memories.schema import EMBEDS
from memories.views.base import OpView
from retrieval.errors import Refusal
from retrieval.ingest import conversation, digests, entities, records, retire, write
from retrieval.search import usage
from retrieval.store import extraction_queue
from tenancy.roles import Role


class MemorySet(OpView):
    """Store one memory, or a batch of up to 500 (all or none). 201 when something was created."""

    op = "memory.set"
    role = Role.WRITER
    request_serializer = PolymorphicProxySerializer(
        component_name="MemorySetRequest",
        serializers=[inputs.MemorySetOne, inputs.MemorySetBatch],
        resource_type_field_name=None,
    )
    response_serializer = PolymorphicProxySerializer(
        component_name="MemorySetResponse",
        serializers=[outputs.WriteResultOut, outputs.MemorySetBatchOut],
        resource_type_field_name=None,
    )
    success = (201, 200)
    refusals = ("MEMORY_PINNED", "VALUE_TOO_LARGE", "TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {
        "memory_key": "customer.acme.contact",
        "value": "Dana Reyes is the Acme contact for the renewal; she prefers email.",
        "tags": ["acme"],
        "entities": ["acme", "dana reyes"],
    }

    def validate(self, body):
        shape = inputs.MemorySetBatch if "items" in body else inputs.MemorySetOne
        serializer = shape(data=body)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def run(self, scope, data):
        agent, overwrite = data.pop("agent"), data.pop("overwrite_pinned")
        batch = data.pop("items", None)
        items = [write.MemoryInput(agent=agent, **dict(item)) for item in (batch or [data])]
        results = write.set_memories(scope, items, overwrite_pinned=overwrite)
        if batch is None:
            return self.answer(results[0], outputs.WriteResultOut, 201 if results[0].outcome == "created" else 200)
        return self.answer_written(results, outputs.MemorySetBatchOut)


class MemorySetFromMessages(OpView):
    """Hand memory a conversation: every message is stored as a turn, and the facts, preferences and events it
    states are extracted and stored as memories (now, or deferred to the extraction queue)."""

    op = "memory.set_from_messages"
    role = Role.WRITER
    request_serializer = inputs.MemorySetFromMessages
    response_serializer = outputs.ConversationOut
    success = (201, 200, 202)
    refusals = ("VALUE_TOO_LARGE", "TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {
        "session_id": "s-15",
        "messages": [
            {"role": "user", "name": "Dana", "content": "I moved to Lisbon last month. I prefer calls after 4pm."},
            {"role": "assistant", "content": "Noted: calls after 4pm, Lisbon time."},
        ],
    }

    def run(self, scope, data):
        messages = [conversation.Message(**dict(message)) for message in data.pop("messages")]
        done = conversation.set_from_messages(scope, messages, **data)
        created = any(result.outcome == "created" for result in done.turns) or any(
            fact["outcome"] == "created" for fact in done.facts
        )
        return self.answer(done, status=202 if data["defer"] else 201 if created else 200)


class SessionSummarySet(OpView):
    """Store what whole sessions covered, one digest each, so a question about a session finds it."""

    op = "session_summary.set"
    role = Role.WRITER
    request_serializer = inputs.SessionSummarySet
    response_serializer = outputs.SessionSummarySetOut
    success = (201, 200)
    refusals = ("VALUE_TOO_LARGE", "TOO_MANY_ITEMS", *EMBEDS)
    example = {
        "items": [
            {
                "session_id": "s-14",
                "summary": "Dana from Acme asked to move the renewal call to March.",
                "session_date": "2026-02-14T10:00:00Z",
            }
        ]
    }

    def run(self, scope, data):
        items = [digests.DigestInput(**dict(item)) for item in data["items"]]
        results = digests.set_digests(scope, data["agent"], items)
        return self.answer_written(results)


class SessionSummaryDelete(OpView):
    """Retire a session's digest."""

    op = "session_summary.delete"
    role = Role.WRITER
    request_serializer = inputs.SessionSummaryDelete
    response_serializer = outputs.SessionSummaryDeleteOut
    example = {"session_id": "s-14"}

    def run(self, scope, data):
        return self.answer(
            {"session_id": data["session_id"], "deleted": digests.delete_digest(scope, data["session_id"])}
        )


class EntitySummarySet(OpView):
    """Store what an entity is, so a question naming it finds its rows."""

    op = "entity_summary.set"
    role = Role.WRITER
    request_serializer = inputs.EntitySummarySet
    response_serializer = outputs.EntitySummarySetOut
    success = (201, 200)
    refusals = ("VALUE_TOO_LARGE", "TOO_MANY_ITEMS", *EMBEDS)
    example = {"items": [{"entity": "acme", "summary": "Acme Corp, an enterprise customer renewing in March."}]}

    def run(self, scope, data):
        results = entities.set_summaries(scope, [entities.EntityInput(**dict(item)) for item in data["items"]])
        return self.answer_written(results)


class EntitySummaryDelete(OpView):
    """Retire an entity's summary."""

    op = "entity_summary.delete"
    role = Role.WRITER
    request_serializer = inputs.EntitySummaryDelete
    response_serializer = outputs.EntitySummaryDeleteOut
    example = {"entity": "acme"}

    def run(self, scope, data):
        deleted = entities.delete_summary(scope, data["entity"])
        return self.answer({"entity": data["entity"].lower(), "deleted": deleted})


class RecordSet(OpView):
    """Store structured records (customers, policies, precedents): named fields, answered by field."""

    op = "record.set"
    role = Role.WRITER
    request_serializer = inputs.RecordSet
    response_serializer = outputs.RecordSetOut
    success = (201, 200)
    refusals = ("VALUE_TOO_LARGE", "TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"items": [{"record_key": "customer:acme", "record_type": "customer", "fields": {"tier": "Enterprise"}}]}

    def run(self, scope, data):
        results = records.set_records(scope, [records.RecordInput(**dict(item)) for item in data["items"]])
        return self.answer_written(results)


class RecordDelete(OpView):
    """Retire a record."""

    op = "record.delete"
    role = Role.WRITER
    request_serializer = inputs.RecordDelete
    response_serializer = outputs.RecordDeleteOut
    refusals = ("INVALID_KEY",)
    example = {"record_key": "customer:acme"}

    def run(self, scope, data):
        deleted = records.delete_record(scope, data["record_key"])
        return self.answer({"record_key": data["record_key"], "deleted": deleted})


class MemoryDelete(OpView):
    """Retire a memory (every writer's row of the key, or one writer's or session's)."""

    op = "memory.delete"
    role = Role.WRITER
    request_serializer = inputs.MemoryDelete
    response_serializer = outputs.MemoryDeleteOut
    refusals = ("INVALID_KEY",)
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        deleted = retire.delete_memory(scope, data["memory_key"], data.get("agent"), data.get("session_id"))
        return self.answer({"memory_key": data["memory_key"], "deleted": deleted})


class ExtractionList(OpView):
    """The namespace's extraction jobs (deferred or failed memory.set_from_messages), newest first, each with its
    state, attempts and last error."""

    op = "extraction.list"
    request_serializer = inputs.ExtractionList
    response_serializer = outputs.ExtractionListOut
    example = {"state": "failed"}

    def run(self, scope, data):
        return self.answer({"jobs": extraction_queue.jobs(scope, data.get("state"), data["limit"])})


class ExtractionRetry(OpView):
    """Try an extraction job again now (or every failed one of the namespace), its attempts counted afresh."""

    op = "extraction.retry"
    role = Role.WRITER
    request_serializer = inputs.ExtractionRetry
    response_serializer = outputs.ExtractionListOut
    refusals = ("JOB_NOT_FOUND",)
    example = {}

    def run(self, scope, data):
        wanted = (
            [data["job_id"]] if "job_id" in data else [job.job_id for job in extraction_queue.jobs(scope, "failed")]
        )
        retried = [job for job in (extraction_queue.retry(scope, job_id) for job_id in wanted) if job is not None]
        if "job_id" in data and not retried:
            raise Refusal("JOB_NOT_FOUND", f"no extraction job {data['job_id']!r} in this namespace", "job_id")
        return self.answer({"jobs": retried})


class MemoryOutcome(OpView):
    """Report that served memories helped (positive) or misled (harm); ranking learns from it."""

    op = "memory.outcome"
    role = Role.WRITER
    request_serializer = inputs.MemoryOutcome
    response_serializer = outputs.OutcomeOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY")
    example = {"memory_keys": ["customer.acme.contact"], "outcome": "positive"}

    def run(self, scope, data):
        recorded = usage.record(
            scope, data["memory_keys"], data["outcome"], data["weight"], data["run_id"], data["trace_id"]
        )
        return self.answer({"recorded": recorded, "outcome": data["outcome"]})
