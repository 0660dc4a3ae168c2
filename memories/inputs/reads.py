"""The request serializers of the ops that read rows by key or by listing."""

from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.fields import (
    Boolean,
    Choice,
    Integer,
    MemoryKey,
    String,
    StringList,
    Timestamp,
)
from memories.inputs.base import MAX_BULK_KEYS, READ_SCOPE_RULES, HeldRead, KeyList
from retrieval.ingest.write import MEMORY_TYPES


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
