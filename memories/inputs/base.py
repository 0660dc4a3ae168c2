"""What every request serializer shares: strictness (an unknown field refused by name), the op's namespace and org,
the limits on a body's size, and the read_scope rules of a read by key."""

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.errors import refusal_of
from memories.fields import (
    Choice,
    MemoryKey,
    String,
)
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
        DRF's deep copy re-runs every field's constructor, most of a request's validation. Its attributes copied as a
        dict, faster than `copy.copy`'s generic path (docs/benchmarks.md)."""
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


def checked(shape: type[serializers.Serializer], data: dict) -> dict:
    """`data` checked as the op whose input `shape` is checks it, outside a request (the Lab's forms, `loom_eval`):
    the refusal REST would answer, naming the field (`questions[3].gold_keys`)."""
    serializer = shape(data=data)
    if not serializer.is_valid():
        raise refusal_of(ValidationError(serializer.errors))
    return dict(serializer.validated_data)
