"""The /v1 ops. Each view names its op, the role it needs, and its serializers;
`OpView.post` does the rest the same way for all of them: read the JSON body,
validate it, authorize the (org, namespace) it addresses, run, answer.
"""

import functools
import json
import re

from django.conf import settings
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import permissions, serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from memories import inputs, outputs
from memories.errors import error_response, outage, refusal_of
from memories.schema import EMBEDS, OpSchema
from retrieval import caching, health
from retrieval.errors import Refusal
from retrieval.evaluation import runs, schedule, sets
from retrieval.gates import calibration, thresholds
from retrieval.ingest import conversation, digests, entities, records, write
from retrieval.providers import costs, customer
from retrieval.providers.embedders import get_embedder
from retrieval.search import ask, brief, pack, planes, service, trace, usage
from retrieval.search.plan import SearchRequest
from retrieval.store import audit, conflict_decisions, extraction_queue, namespaces, reads
from retrieval.store.clickhouse import ClickHouseUnavailable
from tenancy import audit as audit_log
from tenancy import limits
from tenancy.access import Scope, authorize, authorize_org
from tenancy.roles import Role

# The WSGI environ key naming the MCP tool an op was called through (mcp_server/dispatch.py): the trace log shows it.
# No HTTP header can set it (a header becomes an HTTP_ key).
MCP_TOOL = "loom.mcp_tool"


class HasToken(permissions.BasePermission):
    """A token, within its rate limit (tenancy/limits.py)."""

    def has_permission(self, request, view):
        if request.auth is None:
            raise NotAuthenticated()
        limits.check(request.auth.subject)
        return True


def read_json(request) -> dict:
    """The body as a JSON object, whatever Content-Type says (curl -d sends a form type), nested at most MAX_DEPTH
    deep and holding only text UTF-8 can carry."""
    raw = request._request.body  # raises RequestDataTooBig past LOOM_REQUEST_MAX_BYTES
    try:
        body = json.loads(raw or b"{}", parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refusal("MALFORMED_JSON", f"the body is not valid JSON: {exc}") from None
    except RecursionError:  # the decoder's own limit, near a thousand levels
        raise Refusal("MALFORMED_JSON", f"the body nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(body, dict):
        raise Refusal("BODY_NOT_OBJECT", "the body must be a JSON object")
    _walk(body, "", 1, _SURROGATE_ESCAPE.search(raw) is not None)
    return body


MAX_DEPTH = 32  # no op's body nests past a handful of levels; the checks after parsing recurse no further
# A lone surrogate (\ud800) is valid JSON but no UTF-8 text: it would fail every insert and embed. A pair written as
# escapes (\ud83d\ude00) decodes to one character and passes.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _walk(value, path: str, depth: int, surrogates: bool) -> None:
    """Refuse a body nested past MAX_DEPTH, and (when its bytes hold a surrogate escape) any string in it that
    UTF-8 cannot carry, naming where (`items[3].tags[1]`)."""
    if depth > MAX_DEPTH:
        raise Refusal("MALFORMED_JSON", f"the body nests deeper than {MAX_DEPTH} levels", path or None)
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if surrogates:
                _utf8(key, where)
            _walk(item, where, depth + 1, surrogates)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth + 1, surrogates)
    elif surrogates and isinstance(value, str):
        _utf8(value, path)


def _utf8(text: str, where: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        found = text[exc.start].encode("unicode_escape").decode()
        raise Refusal("INVALID_VALUE", f"must be UTF-8 text: it holds a lone surrogate ({found})", where) from None


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def held(scope: Scope, data: dict) -> Scope:
    """The scope of a read by key or listing (inputs.HeldRead), held to the user and session it names under its
    read_scope (Scope.reading); the fields leave `data`."""
    return scope.reading(data.pop("read_scope", None), data.pop("user_id", None), data.pop("session_id", None))


@functools.cache
def _writer(serializer_class: type) -> serializers.Serializer:
    """One instance of each output serializer, made once: DRF deep-copies every declared field each time a
    serializer is made (~5 ms of a search's answer), and an output serializer keeps no state between answers."""
    return serializer_class()


class OpView(APIView):
    op: str
    role: Role = Role.VIEWER
    request_serializer: type = inputs.OpInput
    response_serializer: type = outputs.MemoryOut
    # For the schema (memories/schema.py): the statuses a success answers with, the refusals particular to this op
    # (beyond those every op may give), and a body that succeeds when sent as-is in the order the ops are listed.
    success: tuple[int, ...] = (200,)
    refusals: tuple[str, ...] = ()
    example: dict = {}
    permission_classes = [HasToken]
    # Declares JSON bodies for the schema; the body itself is read by read_json.
    parser_classes = [JSONParser]
    schema = OpSchema()

    def post(self, request):
        body = read_json(request)
        data = self.validate(body)
        scope = authorize(request.auth, data.pop("org", None), data.pop("namespace"), self.role)
        return self.metered_run(scope, data)

    def metered_run(self, scope: Scope, data: dict) -> Response:
        """Run the op; if it reached a model provider, its usage becomes one agent_events row."""
        with costs.accounted(scope.org, scope.namespace, self.op, scope.subject):
            return self.run(scope, data)

    def validate(self, body: dict) -> dict:
        serializer = self.request_serializer(data=body)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def run(self, scope: Scope, data: dict) -> Response:
        raise NotImplementedError

    @property
    def called_as(self) -> str:
        """The name the caller used: the MCP tool's for a tool call (what the trace log shows), else the op's."""
        return self.request.META.get(MCP_TOOL) or self.op

    def answer(self, payload, serializer=None, status=200) -> Response:
        return Response(_writer(serializer or self.response_serializer).to_representation(payload), status=status)

    def answer_written(self, results: list, serializer=None) -> Response:
        """A write batch's results: 201 when it created something, else 200."""
        status = 201 if any(result.outcome == "created" for result in results) else 200
        return self.answer({"items": results, "count": len(results)}, serializer, status)


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


class MemoryGet(OpView):
    """One memory by key, with its write-gate verdicts; history=true adds every version."""

    op = "memory.get"
    request_serializer = inputs.MemoryGet
    response_serializer = outputs.MemoryGetOut
    refusals = ("MEMORY_NOT_FOUND", "INVALID_KEY")
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        scope = held(scope, data)
        rows = reads.get(scope, data["memory_key"], data.get("agent"))
        if not rows:
            raise Refusal("MEMORY_NOT_FOUND", f"no memory with key {data['memory_key']!r}", "memory_key")
        payload = {**rows[0], "row_count": len(rows)}
        if data["history"]:
            payload["history"] = reads.history(scope, data["memory_key"])
            payload["decisions"] = conflict_decisions.of_key(scope, data["memory_key"])
        audit.sensitive_reads(scope.org, scope.namespace, scope.subject, self.op, rows + payload.get("history", []))
        return self.answer(payload)


class MemoryBulkGet(OpView):
    """Up to 1,000 memories by key; the keys not found are listed."""

    op = "memory.bulk_get"
    request_serializer = inputs.MemoryBulkGet
    response_serializer = outputs.MemoryBulkGetOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY")
    example = {"memory_keys": ["customer.acme.contact", "no.such.key"]}

    def run(self, scope, data):
        keys, scope = list(dict.fromkeys(data["memory_keys"])), held(scope, data)
        found = reads.bulk_get(scope, keys)
        audit.sensitive_reads(scope.org, scope.namespace, scope.subject, self.op, list(found.values()))
        return self.answer(
            {"memories": [found[key] for key in keys if key in found], "missing": [k for k in keys if k not in found]}
        )


class MemoryList(OpView):
    """The namespace's keys, newest first (or by score), a page at a time."""

    op = "memory.list"
    request_serializer = inputs.MemoryList
    response_serializer = outputs.MemoryListOut
    refusals = ("INVALID_CURSOR",)
    example = {"limit": 10}

    def run(self, scope, data):
        page = reads.list_keys(held(scope, data), **data)
        return self.answer({"items": page.items, "next_cursor": page.next_cursor})


class MemoryDelete(OpView):
    """Retire a memory (every writer's row of the key, or one writer's or session's)."""

    op = "memory.delete"
    role = Role.WRITER
    request_serializer = inputs.MemoryDelete
    response_serializer = outputs.MemoryDeleteOut
    refusals = ("INVALID_KEY",)
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        deleted = write.delete_memory(scope, data["memory_key"], data.get("agent"), data.get("session_id"))
        return self.answer({"memory_key": data["memory_key"], "deleted": deleted})


class MemoryTimeline(OpView):
    """An entity's, a tag's or a key prefix's memories in time order."""

    op = "memory.timeline"
    request_serializer = inputs.MemoryTimeline
    response_serializer = outputs.TimelineOut
    example = {"entity": "acme"}

    def run(self, scope, data):
        rows, total = reads.timeline(held(scope, data), **data)
        return self.answer({"results": rows, "total_matching": total})


class MemoryRelated(OpView):
    """Memories sharing entities with one memory, most shared first."""

    op = "memory.related"
    request_serializer = inputs.MemoryRelated
    response_serializer = outputs.RelatedOut
    refusals = ("INVALID_KEY",)
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        rows, reason = reads.related(held(scope, data), **data)
        return self.answer({"results": rows, "reason": reason})


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


class MemoryRecall(OpView):
    """The raw conversation behind a memory (the turns it was extracted from), or a session's turns, in order."""

    op = "memory.recall"
    request_serializer = inputs.MemoryRecall
    response_serializer = outputs.RecallOut
    refusals = ("INVALID_KEY", "INVALID_CURSOR")
    example = {"session_id": "s-15", "limit": 50}

    def run(self, scope, data):
        page, reason = reads.recall(held(scope, data), **data)
        return self.answer({"turns": page.items, "next_cursor": page.next_cursor, "reason": reason})


class NamespaceRegister(OpView):
    """Create or update a namespace: its search defaults, trace-log consent, reranker, description."""

    op = "namespace.register"
    role = Role.ADMIN
    request_serializer = inputs.NamespaceRegister
    response_serializer = outputs.NamespaceOut
    success = (201, 200)
    example = {"namespace": "default", "text_capture": True, "description": "Customer facts and conversations"}

    def run(self, scope, data):
        config, created = namespaces.register(scope, data)
        return self.answer({**config.__dict__, "created": created}, status=201 if created else 200)


class MemorySearch(OpView):
    """Search memories: ranked hits with their score components, or an explicit abstain with its code."""

    op = "memory.search"
    request_serializer = inputs.MemorySearch
    response_serializer = outputs.SearchOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", "INVALID_CURSOR", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?", "top_k": 5}

    def run(self, scope, data):
        result = service.search(scope, SearchRequest.of(data), op=self.called_as, run_id=data.get("run_id", ""))
        return self.answer(result)


class SearchQuery(MemorySearch):
    """Search what memory holds in one call: memories, session digests, entity summaries and records ranked
    together, each hit naming its plane; always paged. The MCP tool loom_search is this op."""

    op = "search.query"
    request_serializer = inputs.SearchQuery
    response_serializer = outputs.SearchOut
    example = {"query": "What did Dana ask about the renewal?", "top_k": 5}

    def run(self, scope, data):
        return super().run(scope, {**data, "paging": True, "planes": frozenset(data.get("planes") or planes.PLANES)})


class MemoryAsk(OpView):
    """Answer a question from memory, citing the memories it used; or say memory does not hold it."""

    op = "memory.ask"
    request_serializer = inputs.MemoryAsk
    response_serializer = outputs.AskOut
    refusals = ("READS_LLM_FREE", "TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?"}

    def run(self, scope, data):
        return self.answer(ask.ask(scope, ask.AskRequest.of(data), run_id=data.get("run_id", ""), op=self.called_as))


class ContextPack(OpView):
    """The best evidence for a task as one block that fits a token budget, each line cited by key, the verdict at
    the top; never a model call."""

    op = "context.pack"
    request_serializer = inputs.ContextPack
    response_serializer = outputs.ContextPackOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Prepare the Acme renewal call", "max_tokens": 300}

    def run(self, scope, data):
        request = pack.PackRequest(SearchRequest.of(data), data["max_tokens"])
        return self.answer(pack.pack(scope, request, op=self.called_as, run_id=data.get("run_id", "")))


class MemoryBrief(OpView):
    """Orientation on a task: memory's answer, its grounding, what memory does not know, and what to read next;
    evidence only (no model call) with allow_synthesis=false or LOOM_READS_LLM_FREE."""

    op = "memory.brief"
    request_serializer = inputs.MemoryAsk
    response_serializer = outputs.BriefOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Prepare the Acme renewal call", "allow_synthesis": False}

    def run(self, scope, data):
        request = ask.AskRequest.of(data)
        return self.answer(brief.brief(scope, request, op=self.called_as, run_id=data.get("run_id", "")))


class MemorySearchTrace(OpView):
    """A search with every leg's candidates and the ranking's inputs, for debugging."""

    op = "memory.search_trace"
    request_serializer = inputs.MemorySearchTrace
    response_serializer = outputs.SearchTraceOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?"}

    def run(self, scope, data):
        return self.answer(service.search_trace(scope, SearchRequest.of(data)))


class MemorySearchTraceLog(OpView):
    """Past searches of the namespace, newest first (query text where the namespace consented)."""

    op = "memory.search_trace_log"
    request_serializer = inputs.SearchTraceLog
    response_serializer = outputs.SearchTraceLogOut
    example = {"limit": 20}

    def run(self, scope, data):
        rows, next_before = trace.page(scope, **data)
        return self.answer(
            {"rows": rows, "next_before": next_before, "enabled": settings.LOOM_SEARCH_TRACE_LOG_ENABLED}
        )


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


class CalibrationGet(OpView):
    """The gates in force for the namespace: tier, values, noise level, distributions."""

    op = "calibration.get"
    response_serializer = outputs.CalibrationOut

    def run(self, scope, data):
        return self.answer(thresholds.report(scope.org, scope.namespace))


class CalibrationRun(OpView):
    """Calibrate the namespace's gates from its own labelled pairs (a real embedder only)."""

    op = "calibration.run"
    role = Role.ADMIN
    request_serializer = inputs.CalibrationRun
    response_serializer = outputs.CalibrationOut
    refusals = ("CALIBRATION_UNAVAILABLE", *EMBEDS)
    example = {
        "similar": [
            ["Who is the Acme contact?", "Dana Reyes is the Acme contact for the renewal."],
            ["When does Acme renew?", "The Acme contract renews in March."],
            ["Which plan is Acme on?", "Acme is on the Enterprise plan."],
            ["Where is Acme based?", "Acme is headquartered in Berlin."],
            ["How does Dana like to be reached?", "Dana prefers email over phone calls."],
        ],
        "distractors": [
            ["Who is the Acme contact?", "The office coffee machine is descaled on Fridays."],
            ["When does Acme renew?", "Parking permits are issued by facilities."],
            ["Which plan is Acme on?", "The staging cluster runs in eu-west-1."],
        ],
    }

    def run(self, scope, data):
        embedder = get_embedder()
        if not thresholds.adaptive(embedder.model_name):
            raise Refusal(
                "CALIBRATION_UNAVAILABLE",
                f"{embedder.model_name} is not calibrated: the scalar gates apply to fake embedders and with "
                "LOOM_ADAPTIVE_THRESHOLDS=false",
            )
        pairs = (data["similar"], data["distractors"], data.get("paraphrases", ()))
        calibration.calibrate_namespace(scope.org, scope.namespace, embedder, *pairs)
        audit.record(
            scope.org,
            scope.subject,
            self.op,
            scope.namespace,
            {name: len(pair_list) for name, pair_list in zip(("similar", "distractors", "paraphrases"), pairs)},
        )
        calibration.keep_pairs(scope.org, scope.namespace, *pairs)
        caching.forget_all()
        return self.answer(thresholds.report(scope.org, scope.namespace))


class EvalSetUpload(OpView):
    """Upload a labelled question set: each question with the keys that answer it, or should_abstain. A name
    uploaded again becomes its next version."""

    op = "eval.set_upload"
    role = Role.ADMIN
    request_serializer = inputs.EvalSetUpload
    response_serializer = outputs.EvalSetOut
    success = (201,)
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY")
    example = {
        "set_name": "support-faq",
        "questions": [
            {
                "id": "q1",
                "question": "Who is the Acme contact for the renewal?",
                "gold_keys": ["customer.acme.contact"],
            },
            {"id": "q2", "question": "What is the capital of Mongolia?", "should_abstain": True},
        ],
    }

    def run(self, scope, data):
        uploaded = sets.upload(scope, data["set_name"], [dict(item) for item in data["questions"]])
        return self.answer(uploaded, status=201)


class EvalSetList(OpView):
    """The namespace's question sets, each at its latest version."""

    op = "eval.set_list"
    response_serializer = outputs.EvalSetListOut

    def run(self, scope, data):
        return self.answer({"sets": sets.listed(scope)})


class EvalRun(OpView):
    """Search every question of a set under each configuration (up to 4), as memory.search would; answers at once
    with the run, which goes on: poll eval.run_get for its progress and metrics (or send wait: true for a small
    set, and read its summary)."""

    op = "eval.run"
    role = Role.ADMIN
    request_serializer = inputs.EvalRun
    response_serializer = outputs.EvalRunOut
    success = (202, 200)
    refusals = ("EVAL_SET_NOT_FOUND", "TOO_MANY_ITEMS")
    example = {
        "set_name": "support-faq",
        "configs": [{"name": "hybrid"}, {"name": "semantic", "search_mode": "semantic"}],
    }

    def run(self, scope, data):
        configs = [dict(config) for config in data.get("configs") or [{"name": "default"}]]
        run = runs.start(
            scope, data["set_name"], configs, data.get("version"), wait=data["wait"], wait_limit=inputs.MAX_EVAL_WAIT
        )
        return self.answer(run, status=200 if data["wait"] else 202)


class EvalRunGet(OpView):
    """A run's progress and, per configuration, recall@k, MRR, hit@k, abstain rates, latency and cost with 95%
    intervals, per category too, and the questions two configurations differ on."""

    op = "eval.run_get"
    request_serializer = inputs.EvalRunGet
    response_serializer = outputs.EvalReportOut
    refusals = ("EVAL_RUN_NOT_FOUND", "EVAL_SET_NOT_FOUND")
    example = {"set_name": "support-faq"}

    def run(self, scope, data):
        return self.answer(runs.report(scope, **data))


class EvalRunList(OpView):
    """The namespace's runs, newest first, each with its metrics once done: a set's history over time."""

    op = "eval.run_list"
    request_serializer = inputs.EvalRunList
    response_serializer = outputs.EvalRunListOut
    example = {"set_name": "support-faq"}

    def run(self, scope, data):
        found = runs.listed(scope, data.get("set_name"), data["limit"] + 1, data.get("before"))
        more = len(found) > data["limit"]
        found = found[: data["limit"]]
        return self.answer({"runs": found, "next_before": found[-1]["run_id"] if more else None})


class OrgOpView(OpView):
    """An op on the token's org itself, not on one of its namespaces."""

    request_serializer = inputs.OrgInput

    def post(self, request):
        data = self.validate(read_json(request))
        return self.metered_run(authorize_org(request.auth, data.pop("org", None), self.role), data)


class OrgSetModelCalls(OrgOpView):
    """Switch the org's model calls off or on; off, nothing model-made reaches the org."""

    op = "org.set_model_calls"
    role = Role.ADMIN
    request_serializer = inputs.OrgSetModelCalls
    response_serializer = outputs.ModelCallsOut
    example = {"enabled": True, "reason": "model calls approved by the customer"}

    def run(self, scope, data):
        return self.answer(customer.set_model_calls(scope.org, data["enabled"], data["reason"], scope.subject))


class OrgGetModelCalls(OrgOpView):
    """Whether the org's model calls are on, with the switch's history."""

    op = "org.get_model_calls"
    role = Role.ADMIN
    response_serializer = outputs.ModelCallsOut

    def run(self, scope, data):
        return self.answer(customer.get_model_calls(scope.org))


class AuditList(OrgOpView):
    """The org's audit log: who changed what (switches, tokens, namespaces, calibration), newest first."""

    op = "audit.list"
    role = Role.ADMIN
    request_serializer = inputs.AuditList
    response_serializer = outputs.AuditListOut
    example = {"limit": 20}

    def run(self, scope, data):
        return self.answer(
            {"org": scope.org, "entries": audit_log.entries(scope.org, data["limit"], data.get("before"))}
        )


class Health(APIView):
    """Whether the service can serve, for anyone (a load balancer, a status page): `status` alone. With an admin
    token, what stands behind it: ClickHouse, the providers in use, the problems list."""

    permission_classes = []

    @extend_schema(
        operation_id="health",
        responses={200: outputs.HealthOut, 503: outputs.HealthOut},
        auth=[{}, {"bearerToken": []}],  # open to anyone; an admin token adds the details
    )
    def get(self, request):
        report = health.report()
        admin = request.auth is not None and request.auth.role >= Role.ADMIN
        if admin and report["clickhouse"]["ok"]:  # the admin's org's own: its question sets' regressions
            report["problems"] += list(schedule.problems(request.auth.org))
        body = outputs.HealthOut(report).data if admin else {"status": report["status"]}
        if not report["clickhouse"]["ok"]:
            # The refusal any op gives; the engine's address and the driver's words are for admins alone.
            body.update(refusal_of(ClickHouseUnavailable(report["clickhouse"]["error"])).to_envelope())
            if admin:
                body["error"]["message"] = report["clickhouse"]["error"]
            return outage(Response(body, status=503))
        return Response(body)


class UnknownOp(APIView):
    authentication_classes = []
    permission_classes = []
    schema = None

    def post(self, request, op):
        return error_response("UNKNOWN_OP", f"there is no op {op!r}; see /v1/docs for the list")

    get = put = patch = delete = post
