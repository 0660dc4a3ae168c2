"""Request serializers, one per op: strict, every unknown field refused by name."""

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.fields import (
    Boolean,
    Choice,
    Integer,
    MemoryKey,
    Number,
    String,
    StringList,
    Timestamp,
    Triples,
)
from retrieval import options, sensitivity
from retrieval.write import MEMORY_TYPES, SOURCE_CLASSES

MAX_BATCH = 500
MAX_BULK_KEYS = 1000


class Strict(serializers.Serializer):
    """Refuses fields it does not declare, naming the first one."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise ValidationError(
                {"non_field_errors": [ErrorDetail("must be a JSON object", code="invalid_type")]}
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            allowed = ", ".join(sorted(self.fields))
            raise ValidationError({unknown[0]: [ErrorDetail(f"unknown field (allowed: {allowed})", code="unknown_field")]})
        return super().to_internal_value(data)


class OpInput(Strict):
    """What every op addresses: the token's org (optional, must match) and a namespace."""

    org = String(required=False, max_chars=128, help_text="Must be the token's org when given.")
    namespace = String(default="default", max_chars=128)


class Value(String):
    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        limit = settings.LOOM_MEMORY_VALUE_MAX_BYTES
        if len(data.encode()) > limit:
            raise ValidationError(f"must be at most {limit} bytes (LOOM_MEMORY_VALUE_MAX_BYTES)", code="value_too_large")
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


class MemorySetBatch(WriterFields, OpInput):
    items = MemoryFields(many=True)

    def to_internal_value(self, data):
        items = data.get("items") if isinstance(data, dict) else None
        if isinstance(items, list):
            if len(items) > MAX_BATCH:
                raise ValidationError(
                    {"items": [ErrorDetail(f"at most {MAX_BATCH} memories per call (got {len(items)})", code="too_many_items")]}
                )
            if not items:
                raise ValidationError({"items": [ErrorDetail("must hold at least one memory", code="empty")]})
        validated = super().to_internal_value(data)
        seen = {}
        for index, item in enumerate(validated["items"]):
            identity = (item["memory_key"], item["session_id"])
            if identity in seen:
                raise ValidationError(
                    {"items": {index: {"memory_key": [ErrorDetail(
                        f"repeats items[{seen[identity]}] (same memory_key and session_id)", code="duplicate_item"
                    )]}}}
                )  # fmt: skip
            seen[identity] = index
        return validated


class MemoryGet(OpInput):
    memory_key = MemoryKey()
    agent = String(required=False, max_chars=128, help_text="Narrow to one writer; default every writer.")
    session_id = String(required=False, max_chars=256)
    history = Boolean(default=False, help_text="Also return every version, newest first.")


class MemoryBulkGet(OpInput):
    memory_keys = serializers.ListField(child=MemoryKey())

    def to_internal_value(self, data):
        keys = data.get("memory_keys") if isinstance(data, dict) else None
        if isinstance(keys, list) and len(keys) > MAX_BULK_KEYS:
            raise ValidationError(
                {"memory_keys": [ErrorDetail(f"at most {MAX_BULK_KEYS} keys per call (got {len(keys)})", code="too_many_items")]}
            )
        return super().to_internal_value(data)


class MemoryList(OpInput):
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


class NamespaceRegister(OpInput):
    namespace = String(max_chars=128)
    retrieval_defaults = RetrievalDefaults(required=False)
    text_capture = Boolean(required=False, help_text="Consent to store query text in the search trace log.")
    rerank_endpoint = String(required=False, max_chars=256, plain=True)
    description = String(required=False, max_chars=1024)

    def validate_rerank_endpoint(self, value):
        if "://" in value:
            raise ValidationError(
                "must be builtin:openai[:model], builtin:cohere[:model] or a name from "
                "LOOM_RERANK_ENDPOINTS_JSON; a URL is refused"
            )
        return value
