"""The request serializers of the ops that write memory."""

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from memories.fields import (
    Boolean,
    Choice,
    Integer,
    MemoryKey,
    Number,
    String,
    StringList,
    StringMap,
    Timestamp,
    Triples,
)
from memories.inputs.base import MAX_BATCH, MAX_MESSAGES, KeyList, OpInput, Strict, Value
from retrieval.ingest import sensitivity
from retrieval.ingest.conversation import ROLES
from retrieval.ingest.write import MEMORY_TYPES, SOURCE_CLASSES


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


class ExtractionList(OpInput):
    state = Choice(("pending", "done", "failed"), required=False, help_text="Only jobs in this state.")
    limit = Integer(min_value=1, max_value=500, default=50)


class ExtractionRetry(OpInput):
    job_id = String(max_chars=64, allow_empty=False, plain=True, required=False, help_text="Else every failed job.")
