"""Request serializers, one per op: strict, every unknown field refused by name."""

import re

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.errors import refusal_of
from memories.fields import (
    Boolean,
    Choice,
    Day,
    Integer,
    MemoryKey,
    Number,
    String,
    StringList,
    StringMap,
    TextPairs,
    Timestamp,
    Triples,
)
from retrieval import options
from retrieval.errors import Refusal
from retrieval.evaluation import sets
from retrieval.ingest import sensitivity
from retrieval.ingest.conversation import ROLES
from retrieval.ingest.write import MEMORY_TYPES, SOURCE_CLASSES
from retrieval.search import planes, rerank
from tenancy.models import NAME_PATTERN, NAME_RULE

MAX_BATCH = 500
MAX_BULK_KEYS = 1000
MAX_MESSAGES = 200
MAX_EVAL_QUESTIONS = 5000
MAX_EVAL_CONFIGS = 4
MAX_EVAL_WAIT = 1000  # searches a caller may wait for in one request (~30 s at fast budget)


class Strict(serializers.Serializer):
    """Refuses fields it does not declare, naming the first one. `rules`: what `validate` checks across fields,
    as JSON Schema `if`/`then` pairs for the OpenAPI document's `allOf` (memories/schema.py); client generators
    keep a body's type beside those, where an `anyOf` leaves them with none."""

    rules: tuple[dict, ...] = ()

    def get_fields(self):
        """Each declared field copied, not rebuilt: a field's per-request state is what `bind` sets on it, and
        DRF's deep copy re-runs every field's constructor (0.4 of a search request's 0.9 ms of validation). Its
        attributes copied as a dict: `copy.copy`'s generic path took 85 us of a search request's 43 fields, this
        24."""
        return {name: _copied(field) for name, field in self._declared_fields.items()}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": [ErrorDetail("must be a JSON object", code="invalid_type")]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            allowed = ", ".join(sorted(self.fields))
            raise ValidationError(
                {unknown[0]: [ErrorDetail(f"unknown field (allowed: {allowed})", code="unknown_field")]}
            )
        return super().to_internal_value(data)


def _copied(field: serializers.Field) -> serializers.Field:
    """A shallow copy of a field (what `copy.copy` makes of one)."""
    twin = object.__new__(type(field))
    twin.__dict__.update(field.__dict__)
    return twin


class OpInput(Strict):
    """What every op addresses: the token's org (optional, must match) and a namespace."""

    org = String(required=False, max_chars=128, help_text="Must be the token's org when given.")
    namespace = String(default="default", max_chars=128, pattern=NAME_PATTERN.pattern, help_text=NAME_RULE)


class Value(String):
    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        limit = settings.LOOM_MEMORY_VALUE_MAX_BYTES
        if len(data.encode()) > limit:
            raise ValidationError(
                f"must be at most {limit} bytes (LOOM_MEMORY_VALUE_MAX_BYTES)", code="value_too_large"
            )
        return data


class MemoryFields(Strict):
    memory_key = MemoryKey()
    value = Value(allow_empty=False)
    memory_type = Choice(MEMORY_TYPES, default="fact")
    tags = StringList(max_items=64, max_chars=128, default=list)
    category = String(max_chars=128, plain=True, default="")
    entities = StringList(max_items=64, max_chars=256, default=list)
    triples = Triples(default=list, help_text="[{subject, relation, object}]: feeds the graph leg.")
    confidence = Number(min_value=0, max_value=1, default=1.0)
    source_class = Choice(SOURCE_CLASSES, default="asserted")
    sensitivity = Choice(sensitivity.LEVELS, default="low", help_text="Raised to high when the value holds a secret.")
    pinned = Boolean(default=False, help_text="A pinned row is not overwritten (409 MEMORY_PINNED).")
    valid_at = Timestamp(default=None, allow_null=True)
    user_id = String(max_chars=256, plain=True, default="")
    session_id = String(max_chars=256, plain=True, default="")
    run_id = String(max_chars=256, plain=True, default="")


class WriterFields(serializers.Serializer):
    agent = String(max_chars=128, plain=True, allow_empty=False, default="default", help_text="The writer.")
    overwrite_pinned = Boolean(default=False)


class MemorySetOne(MemoryFields, WriterFields, OpInput):
    pass


class Batch(serializers.ListSerializer):
    """A write batch: 1 to MAX_BATCH items. Its size is checked before any item, so an oversized batch hears
    TOO_MANY_ITEMS, not its first bad item.

    An item naming the same thing (`identity`) as a later one is replaced by it, in the earlier one's place: the
    later wins, as two calls in that order would leave it. JSON Schema cannot say "unique by key" (uniqueItems
    compares whole items), so a schema-valid body is accepted rather than refused for it."""

    def __init__(self, *, noun: str, field: str | None, identity=None, limit: int = MAX_BATCH, **kwargs):
        """`field`: what names an item (its identity unless `identity` says otherwise), for the schema's words; None:
        items are not named, each is kept (a conversation's messages)."""
        self.noun, self.limit = noun, limit
        self.identity = identity or (lambda item: item[field]) if field else None
        if field:
            kwargs.setdefault(
                "help_text", f"An item naming the {field} of a later one is replaced by it (the later wins)."
            )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, list) and len(data) > self.limit:
            raise ValidationError(f"at most {self.limit} {self.noun} per call (got {len(data)})", code="too_many_items")
        if isinstance(data, list) and not data:
            raise ValidationError("must hold at least one item", code="empty")
        items = super().to_internal_value(data)
        if self.identity is None:
            return items
        latest = {}
        for item in items:
            latest[self.identity(item)] = item  # a dict keeps the first place, takes the last value
        return list(latest.values())


class MemorySetBatch(WriterFields, OpInput):
    items = Batch(
        child=MemoryFields(),
        noun="memories",
        field="memory_key",
        identity=lambda item: (item["memory_key"], item["session_id"]),
        help_text="Stored together or not at all. An item naming the memory_key and session_id of a later one is "
        "replaced by it (the later wins).",
    )


class Message(Strict):
    role = Choice(ROLES, help_text="Who spoke: user, assistant, system or tool (the last two are stored, not read).")
    content = Value(allow_empty=False)
    name = String(max_chars=128, plain=True, default="", help_text="The speaker's name, when the role is a person.")
    created_at = Timestamp(default=None, allow_null=True, help_text="When it was said (else in the order sent).")


class MemorySetFromMessages(OpInput):
    messages = Batch(
        child=Message(),
        noun="messages",
        field=None,
        limit=MAX_MESSAGES,
        help_text="The conversation, in order: each stored as a turn, then read for facts.",
    )
    session_id = String(max_chars=256, plain=True, allow_empty=False)
    agent = String(max_chars=128, plain=True, allow_empty=False, default="default", help_text="The writer.")
    user_id = String(max_chars=256, plain=True, default="")
    run_id = String(max_chars=256, plain=True, default="")
    defer = Boolean(
        default=False,
        help_text="Store the turns now and extract later (202 with a job_id; search counts it in pending_extraction).",
    )


class KeyList(serializers.ListField):
    """A list of memory keys with a count limit that answers TOO_MANY_ITEMS."""

    def __init__(self, *, limit: int, **kwargs):
        self.limit = limit
        super().__init__(child=MemoryKey(), max_length=limit, **kwargs)  # max_length: for the schema

    def to_internal_value(self, data):
        if isinstance(data, list) and len(data) > self.limit:
            raise ValidationError(f"at most {self.limit} keys (got {len(data)})", code="too_many_items")
        return super().to_internal_value(data)


# read_scope reads the caller's own user (or session) only: it needs to know which ("-" is no filter).
READ_SCOPE_RULES = tuple(
    {
        "if": {"required": ["read_scope"], "properties": {"read_scope": {"const": scope}}},
        "then": {"required": needs, "properties": dict.fromkeys(needs, {"not": {"enum": ["", "-"]}})},
    }
    for scope, needs in (("own_user", ["user_id"]), ("own_session", ["user_id", "session_id"]))
)


def read_scope_needs(data: dict) -> dict:
    """The request's own read_scope names whose rows it reads: it needs that user (and session), whatever else the
    request is (a page of a parked result too). The token's read_scope is held to the same when the search runs
    (retrieval/search/reach.py)."""
    asked = data.get("read_scope")
    needs = {"own_user": ("user_id",), "own_session": ("user_id", "session_id")}.get(asked, ())
    for name in needs:
        if data.get(name) in (None, "", "-"):
            raise ValidationError(
                {name: [ErrorDetail(f"read_scope {asked} needs the request's {name}", code="required")]}
            )
    return data


class HeldRead(OpInput):
    """A read of rows by key or listing: a read_scope (the token's, or the request's own) holds it to the rows of
    the user (and session) it names; naming one without also narrows to them."""

    user_id = String(max_chars=256, required=False, help_text="Only this end user's rows; '-' means no filter.")
    session_id = String(max_chars=256, required=False, help_text="Only this session's rows.")
    read_scope = Choice(("own_user", "own_session"), required=False)

    rules = READ_SCOPE_RULES

    def validate(self, data):
        return read_scope_needs(data)


class MemoryGet(HeldRead):
    memory_key = MemoryKey()
    agent = String(required=False, max_chars=128, help_text="Narrow to one writer; default every writer.")
    history = Boolean(default=False, help_text="Also return every version, newest first.")


class MemoryBulkGet(HeldRead):
    memory_keys = KeyList(limit=MAX_BULK_KEYS)


class MemoryList(HeldRead):
    order = Choice(("recent", "score"), default="recent")
    limit = Integer(min_value=1, max_value=1000, default=100)
    cursor = String(required=False, max_chars=1024)
    memory_type = Choice(MEMORY_TYPES, required=False)
    agent = String(required=False, max_chars=128)
    key_prefix = String(required=False, max_chars=512)


class MemoryDelete(OpInput):
    memory_key = MemoryKey()
    agent = String(required=False, max_chars=128, help_text="Narrow to one writer; default every writer.")
    session_id = String(required=False, max_chars=256)


class SessionSummary(Strict):
    session_id = String(max_chars=256, plain=True, allow_empty=False)
    summary = Value(allow_empty=False, help_text="What the session covered: a paragraph.")
    session_date = Timestamp(default=None, allow_null=True, help_text="When the session took place.")
    user_id = String(max_chars=256, plain=True, default="", help_text="Whose session (read_scope own_user).")
    sensitivity = Choice(sensitivity.LEVELS, default="low", help_text="Raised to high when the text holds a secret.")


class SessionSummarySet(OpInput):
    agent = String(max_chars=128, plain=True, allow_empty=False, default="default", help_text="The writer.")
    items = Batch(child=SessionSummary(), noun="summaries", field="session_id")


class SessionSummaryDelete(OpInput):
    session_id = String(max_chars=256, plain=True, allow_empty=False)


class EntitySummary(Strict):
    entity = String(max_chars=256, allow_empty=False, help_text="As rows name it in `entities` (case ignored).")
    summary = Value(allow_empty=False, help_text="What the entity is, in the words people use for it.")
    sensitivity = Choice(sensitivity.LEVELS, default="low", help_text="Raised to high when the text holds a secret.")


class EntitySummarySet(OpInput):
    items = Batch(child=EntitySummary(), noun="summaries", field="entity", identity=lambda item: item["entity"].lower())


class EntitySummaryDelete(OpInput):
    entity = String(max_chars=256, allow_empty=False)


class Record(Strict):
    record_key = MemoryKey(help_text="The record's name, unique in the namespace.")
    record_type = String(max_chars=128, plain=True, allow_empty=False, help_text="customer, policy, precedent, ...")
    sensitivity = Choice(sensitivity.LEVELS, default="low", help_text="Raised to high when the text holds a secret.")

    def get_fields(self):
        # `fields` is the wire name, and a serializer's own attribute: declared here, not as a class attribute.
        return {
            **super().get_fields(),
            "fields": StringMap(
                help_text="Named values; a precedent's: decision, and optionally situation and rationale."
            ),
        }


class RecordSet(OpInput):
    items = Batch(child=Record(), noun="records", field="record_key")


class RecordDelete(OpInput):
    record_key = MemoryKey()


class Reranker(String):
    """none, builtin:openai[:model], builtin:cohere[:model] or a configured endpoint's name."""

    def __init__(self, **kwargs):
        super().__init__(max_chars=256, plain=True, **kwargs)

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if data and (why := rerank.problem(data)):
            raise ValidationError(why)
        return data

    def json_schema(self):
        empty = "|" if self.allow_empty else ""
        return {**super().json_schema(), "pattern": f"^({empty}{rerank.names_pattern()})$"}


class RetrievalDefaults(Strict):
    """The per-namespace search defaults the spec lists; a request's own field wins."""

    search_mode = Choice(options.SEARCH_MODES, required=False)
    retrieval_budget = Choice(options.BUDGETS, required=False)
    top_k = Integer(min_value=1, max_value=500, required=False)
    bodies = Choice(options.BODIES, required=False)
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    chunk_max_share = Number(min_value=0, max_value=1, required=False)
    recency_pool_weight = Number(min_value=0, max_value=1, required=False)
    reinforcement_weight = Number(min_value=0, max_value=1, required=False)
    confidence_weight = Number(min_value=0, max_value=1, required=False)
    alpha = Number(min_value=0, max_value=1, required=False)
    digest_descent = Number(
        min_value=0,
        max_value=1,
        required=False,
        help_text="The session_digest term's weight: rows of the session a question singles out by its digest.",
    )


class NamespaceRegister(OpInput):
    namespace = String(max_chars=128, pattern=NAME_PATTERN.pattern, help_text=NAME_RULE)
    retrieval_defaults = RetrievalDefaults(required=False)
    text_capture = Boolean(required=False, help_text="Consent to store query text in the search trace log.")
    rerank_endpoint = Reranker(required=False, help_text="The namespace's default reranker; empty: none.")
    description = String(required=False, max_chars=1024)


class HowToSearch(serializers.Serializer):
    """The fields that choose how a search runs: a memory.search's, and an evaluation's configuration's."""

    search_mode = Choice(options.SEARCH_MODES, required=False)
    recipe = Choice(tuple(options.RECIPES), required=False)
    retrieval_budget = Choice(options.BUDGETS, required=False)
    alpha = Number(min_value=0, max_value=1, required=False)
    hyde = Boolean(required=False)


class MemorySearch(OpInput, HowToSearch):
    query = String(required=False, max_chars=4000, allow_empty=False, help_text="Required unless page is set.")
    top_k = Integer(min_value=1, max_value=500, required=False, help_text="Window size, default 5.")
    agent = String(max_chars=128, default="*", help_text="'*' (default) reads every writer.")
    memory_type = Choice(MEMORY_TYPES, required=False, help_text="Unset: every type but reflection.")
    tags = StringList(max_items=64, max_chars=128, default=list, help_text="OR filter.")
    tags_soft = StringList(max_items=64, max_chars=128, default=list, help_text="A boost, not a filter.")
    category = String(max_chars=128, required=False)
    category_soft = String(max_chars=128, required=False)
    demote_tags = StringList(max_items=64, max_chars=128, default=list)
    entity_filter = StringList(max_items=64, max_chars=256, default=list)
    user_id = String(max_chars=256, required=False, help_text="'-' means no filter.")
    session_id = String(max_chars=256, required=False)
    run_id = String(max_chars=256, required=False)
    read_scope = Choice(("own_user", "own_session"), required=False)
    namespace_scope = Choice(("this", "all_mine"), required=False)
    exclude_keys = KeyList(limit=200, default=list)
    include_duplicates = Boolean(default=False)
    include_superseded = Boolean(default=False)
    include_proposed = Boolean(default=False)
    as_of = Timestamp(required=False)
    as_of_basis = Choice(("valid_time", "knowledge_time"), default="valid_time")
    observation_date = Day(required=False)
    bodies = Choice(options.BODIES, required=False)
    body_budget_tokens = Integer(min_value=1, max_value=1_000_000, required=False)
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    explain = Boolean(default=False)
    render = Choice(
        ("reader",),
        required=False,
        help_text='"reader": also return the hits as one text block (reader_block), the way a model reads evidence.',
    )
    paging = Boolean(default=False)
    page = String(max_chars=128, required=False)
    personalization = Choice(("default", "none"), default="default")
    confidence_weight = Number(min_value=0, max_value=1, required=False)
    recency_pool_weight = Number(min_value=0, max_value=1, required=False)
    reinforcement_weight = Number(min_value=0, max_value=1, required=False)
    chunk_max_share = Number(min_value=0, max_value=1, required=False)
    rerank = Reranker(
        allow_empty=False,
        required=False,
        help_text="none, builtin:openai[:model], builtin:cohere[:model] or a configured endpoint name.",
    )

    rules = (
        {"if": {"not": {"required": ["page"]}}, "then": {"required": ["query"]}},
        *READ_SCOPE_RULES,
    )

    def validate(self, data):
        if "query" not in data and "page" not in data:
            raise ValidationError({"query": [ErrorDetail("this field is required (or send page)", code="required")]})
        return read_scope_needs(data)


class SearchQuery(MemorySearch):
    """memory.search's fields, always paged (an agent reads a window and asks for the next: `next` -> page=), and
    the planes to search."""

    paging = None
    planes = StringList(
        max_items=4,
        choices=planes.PLANES,
        required=False,
        help_text="Of memory, session, entity and record; default every one.",
    )


class ContextPack(MemorySearch):
    """memory.search's scope and filters, and the pack's budget. Never a model call: no budget, HyDE or reranker to
    ask for (the search runs as `fast`)."""

    query = String(max_chars=4000, allow_empty=False, help_text="The task or question the evidence is for.")
    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Hits considered, default 20.")
    max_tokens = Integer(
        min_value=32,
        max_value=32_000,
        default=1000,
        help_text="The block's budget, counted as four characters a token or one a word or mark where that is more.",
    )
    paging = page = render = bodies = body_budget_tokens = explain = None
    retrieval_budget = hyde = rerank = None
    rules = READ_SCOPE_RULES  # query is required


class MemorySearchTrace(MemorySearch):
    """memory.search's fields; a trace explains one query, so there is one."""

    query = String(max_chars=4000, allow_empty=False)
    rules = READ_SCOPE_RULES

    def validate(self, data):
        return read_scope_needs(data)


class RecentMessage(Strict):
    role = Choice(("user", "assistant"))
    content = String(max_chars=4000)


class MemoryAsk(MemorySearch):
    """memory.search's fields (top_k default 15; no paging) and the answer's own."""

    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Hits retrieved, default 15.")
    query = String(max_chars=4000, allow_empty=False)
    paging = None
    page = None
    render = None
    allow_synthesis = Boolean(default=True, help_text="false: the evidence only, no LLM call (source retrieval_only).")
    max_answer_chars = Integer(min_value=50, max_value=20_000, default=2000)
    recent_messages = RecentMessage(
        many=True,
        required=False,
        max_length=40,
        help_text="Up to 40 earlier turns, so a follow-up resolves its referents; never stored.",
    )
    llm_cache = Boolean(
        required=False,
        help_text="Serve and keep the answer in the response cache (default: "
        "LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT, or the namespace in LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES).",
    )
    presupposition_rule = Boolean(
        default=True, help_text="A question whose premise no memory records is answered with that fact first."
    )
    knowledge = Boolean(
        default=True,
        help_text="Search knowledge documents too. This build has none: accepted, "
        "so a caller that opts out is not refused.",
    )

    rules = READ_SCOPE_RULES  # query is required

    def validate(self, data):
        return read_scope_needs(data)


class MemoryOutcome(OpInput):
    memory_keys = KeyList(limit=1000)
    outcome = Choice(("positive", "harm"))
    weight = Number(min_value=0, max_value=10, default=1.0)
    run_id = String(max_chars=256, default="")
    trace_id = String(
        max_chars=64,
        default="",
        help_text="The search that served these keys (its answer's trace_id): a positive outcome then labels its "
        "question for evaluation (the Lab's Build from outcomes).",
    )


class SearchTraceLog(OpInput):
    since = Timestamp(required=False)
    until = Timestamp(required=False)
    op = String(max_chars=64, required=False)
    abstain = Boolean(required=False)
    risk = Choice(("low", "medium", "high", "abstain"), required=False)
    limit = Integer(min_value=1, max_value=500, default=50)
    before = String(max_chars=64, required=False, help_text="trace_id of the last row of the previous page")


class MemoryTimeline(HeldRead):
    entity = String(required=False, max_chars=256)
    tags = StringList(max_items=64, max_chars=128, required=False)
    memory_key_prefix = String(required=False, max_chars=512)
    since = Timestamp(required=False)
    until = Timestamp(required=False)
    order = Choice(("desc", "asc"), default="desc")
    top_k = Integer(min_value=1, max_value=1000, default=50)

    rules = (
        {
            "if": {
                "not": {
                    "anyOf": [
                        {"required": ["entity"], "properties": {"entity": {"minLength": 1}}},
                        {"required": ["memory_key_prefix"], "properties": {"memory_key_prefix": {"minLength": 1}}},
                        {"required": ["tags"], "properties": {"tags": {"minItems": 1}}},
                    ]
                }
            },
            "then": False,
        },
        *READ_SCOPE_RULES,
    )

    def validate(self, data):
        if not (data.get("entity") or data.get("tags") or data.get("memory_key_prefix")):
            raise ValidationError(
                {"entity": [ErrorDetail("send one of entity, tags or memory_key_prefix", code="required")]}
            )
        return super().validate(data)


class ExtractionList(OpInput):
    state = Choice(("pending", "done", "failed"), required=False, help_text="Only jobs in this state.")
    limit = Integer(min_value=1, max_value=500, default=50)


class ExtractionRetry(OpInput):
    job_id = String(max_chars=64, allow_empty=False, plain=True, required=False, help_text="Else every failed job.")


class MemoryRecall(HeldRead):
    memory_key = MemoryKey(required=False, help_text="A memory: the turns it came from. Else send session_id.")
    limit = Integer(min_value=1, max_value=500, default=50)
    cursor = String(required=False, max_chars=1024)

    rules = (
        {"if": {"not": {"anyOf": [{"required": ["memory_key"]}, {"required": ["session_id"]}]}}, "then": False},
        *READ_SCOPE_RULES,
    )

    def validate(self, data):
        if "memory_key" not in data and not data.get("session_id"):
            raise ValidationError({"memory_key": [ErrorDetail("send memory_key or session_id", code="required")]})
        return super().validate(data)


class MemoryRelated(HeldRead):
    memory_key = MemoryKey()
    min_overlap = Integer(min_value=1, max_value=64, default=1)
    top_k = Integer(min_value=1, max_value=500, default=20)


class OrgInput(Strict):
    """An op on the token's org itself."""

    org = String(required=False, max_chars=128, help_text="Must be the token's org when given.")


class AuditList(OrgInput):
    limit = Integer(min_value=1, max_value=500, default=100)
    before = Timestamp(required=False, help_text="The `at` of the last entry of the previous page.")


class OrgSetModelCalls(OrgInput):
    enabled = Boolean(help_text="false switches every model call for the org off: nothing model-made reaches it.")
    reason = String(max_chars=500, allow_empty=False, plain=True, help_text="Why; kept in the audit trail.")


class CalibrationRun(OpInput):
    similar = TextPairs(
        min_items=5, max_items=500, help_text="A question and the stored fact that answers it: the trigger gates."
    )
    distractors = TextPairs(min_items=3, max_items=500, help_text="Pairs on unrelated subjects: floor and abstain.")
    paraphrases = TextPairs(
        min_items=5,
        max_items=500,
        required=False,
        help_text="Two wordings of one fact: the write gates (conflict, duplicate). Without them the write gates "
        "stay with the cluster calibration.",
    )


class EvalQuestion(Strict):
    id = String(
        required=False, max_chars=256, plain=True, allow_empty=False, help_text="Default: its line number, from 1."
    )
    question = String(max_chars=4000, allow_empty=False)
    gold_keys = KeyList(limit=100, default=list, help_text="The memory keys that answer it.")
    should_abstain = Boolean(default=False, help_text="Memory does not hold the answer: a good search abstains.")
    category = String(max_chars=128, plain=True, default="", help_text="Metrics are also reported per category.")
    answer = String(max_chars=4000, default="", help_text="A reference answer, kept with the question.")

    rules = (
        {
            "if": {"not": {"required": ["should_abstain"], "properties": {"should_abstain": {"const": True}}}},
            "then": {"required": ["gold_keys"], "properties": {"gold_keys": {"minItems": 1}}},
        },
    )

    def validate(self, data):
        if not data["gold_keys"] and not data["should_abstain"]:
            raise ValidationError(
                {"gold_keys": [ErrorDetail("name the keys that answer it, or set should_abstain", code="required")]}
            )
        return data


class EvalSetUpload(OpInput):
    set_name = String(max_chars=128, plain=True, allow_empty=False, help_text="Uploading a name again adds a version.")
    questions = Batch(
        child=EvalQuestion(),
        noun="questions",
        field="id",
        identity=lambda item: item.get("id") or object(),
        limit=MAX_EVAL_QUESTIONS,
    )


def checked(shape: type[serializers.Serializer], data: dict) -> dict:
    """`data` checked as the op whose input `shape` is checks it, outside a request (the Lab's forms, `loom_eval`):
    the refusal REST would answer, naming the field (`questions[3].gold_keys`)."""
    serializer = shape(data=data)
    if not serializer.is_valid():
        raise refusal_of(ValidationError(serializer.errors))
    return dict(serializer.validated_data)


def eval_questions(set_name: str, items: list) -> list[dict]:
    """Questions checked as eval.set_upload checks its body."""
    return [dict(item) for item in checked(EvalSetUpload, {"set_name": set_name, "questions": items})["questions"]]


def eval_questions_from_jsonl(set_name: str, text: str) -> list[dict]:
    """A JSONL file's questions, checked; a refusal names the file's line."""
    items, lines = sets.read_jsonl(text)
    try:
        return eval_questions(set_name, items)
    except Refusal as refusal:
        found = re.match(r"questions\[(\d+)\]\.?(.*)", refusal.field or "")
        if not found:
            raise
        line, field = lines[int(found[1])], found[2]
        message = refusal.message.split(": ", 1)[-1]
        raise Refusal(
            refusal.code, f"line {line}: {field or 'the question'}: {message}", field or None, line=line
        ) from None


class EvalConfig(Strict, HowToSearch):
    """A configuration to measure: a name and the memory.search fields it sets (the rest as a search leaves them)."""

    name = String(max_chars=64, plain=True, allow_empty=False)
    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Default 20 (recall@20 needs 20 hits).")
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    rerank = Reranker(allow_empty=False, required=False)
    include_duplicates = Boolean(required=False)
    personalization = Choice(("default", "none"), required=False)


class EvalRun(OpInput):
    set_name = String(max_chars=128, plain=True, allow_empty=False)
    version = Integer(min_value=1, max_value=2**32 - 1, required=False, help_text="Default: the set's latest.")
    configs = Batch(
        child=EvalConfig(),
        noun="configurations",
        field="name",
        limit=MAX_EVAL_CONFIGS,
        required=False,
        help_text="Default: one, named default, that sets nothing. A name given twice: the later configuration wins.",
    )
    wait = Boolean(
        default=False,
        help_text=f"true: answer once the run is done (200), for up to {MAX_EVAL_WAIT} searches; else at once (202).",
    )


class EvalRunGet(OpInput):
    run_id = String(max_chars=64, required=False, help_text="Default: the namespace's latest run (of set_name).")
    set_name = String(max_chars=128, required=False)
    a = String(
        max_chars=64,
        allow_empty=False,
        required=False,
        help_text="Wins and losses of b against a; default the first two.",
    )
    b = String(max_chars=64, allow_empty=False, required=False)
    against = String(
        max_chars=64,
        allow_empty=False,
        required=False,
        help_text="An earlier run of the same questions: a names its configuration (default b's name, else its first).",
    )


class EvalRunList(OpInput):
    set_name = String(max_chars=128, required=False)
    limit = Integer(min_value=1, max_value=500, default=50)
    before = String(max_chars=64, required=False, help_text="run_id of the last run of the previous page")
