"""Strict request fields: a wrong JSON type is an error, never coerced.

DRF's stock fields turn `5` into `"5"` and `"yes"` into `True`; an agent that
sends the wrong type should hear about it. Each field also states its JSON Schema
(`json_schema`), which the OpenAPI document publishes (memories/schema.py): the
rules a field enforces and the ones it documents are written side by side.
"""

import re
import unicodedata
from datetime import UTC, date, datetime

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

# Character classes in the syntax Python's re and a schema's ECMA `pattern` share. White space is listed, not
# `\s`: Python's, ECMA's and Rust's `\s` each differ (U+001C-U+001F, U+0085, U+FEFF), and a blank value must be
# one the service and every schema validator agree on.
_CONTROL_CHARS = r"\u0000-\u001f\u007f-\u009f"
_SPACE_CHARS = r"\t\n\u000b\u000c\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_CONTROL = re.compile(f"[{_CONTROL_CHARS}]")
_NOT_BLANK = f"[^{_SPACE_CHARS}]"  # a pattern matches anywhere: some character that is not white space
_NOT_BLANK_RE = re.compile(_NOT_BLANK)
_NO_CONTROL = f"^[^{_CONTROL_CHARS}]*$"
_NO_CONTROL_NOT_BLANK = f"^[^{_CONTROL_CHARS}]*[^{_SPACE_CHARS}{_CONTROL_CHARS}][^{_CONTROL_CHARS}]*$"


def _type_error(expected: str):
    return ValidationError(f"must be {expected}", code="invalid_type")


class Typed(serializers.Field):
    """A request field that states its own JSON Schema; drf-spectacular reads it (memories/schema.py)."""

    def json_schema(self) -> dict:
        raise NotImplementedError

    def to_representation(self, value):
        return value


class String(Typed):
    """`allow_empty=False` refuses blank strings too; `plain` refuses control characters. `pattern` is a rule
    enforced elsewhere (a namespace's, by tenancy), stated here so the schema says it."""

    def __init__(self, *, max_chars=None, max_bytes=None, allow_empty=True, plain=False, pattern=None, **kwargs):
        self.max_chars, self.max_bytes = max_chars, max_bytes
        self.allow_empty, self.plain, self.pattern = allow_empty, plain, pattern
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a string")
        if not self.allow_empty and not _NOT_BLANK_RE.search(data):
            raise ValidationError("must not be empty", code="empty")
        if self.max_chars is not None and len(data) > self.max_chars:
            raise ValidationError(f"must be at most {self.max_chars} characters", code="max_length")
        if self.max_bytes is not None and len(data.encode()) > self.max_bytes:
            raise ValidationError(f"must be at most {self.max_bytes} bytes", code="max_length")
        if self.plain and _CONTROL.search(data):
            raise ValidationError("must not contain control characters", code="control_characters")
        return data

    def json_schema(self):
        schema = {"type": "string"}
        if not self.allow_empty:
            schema["minLength"] = 1
        if self.max_chars is not None:
            schema["maxLength"] = self.max_chars
        if self.pattern:
            schema["pattern"] = self.pattern
        elif self.plain:
            schema["pattern"] = _NO_CONTROL if self.allow_empty else _NO_CONTROL_NOT_BLANK
        elif not self.allow_empty:
            schema["pattern"] = _NOT_BLANK
        return schema


class MemoryKey(String):
    """Non-empty, at most 512 bytes of UTF-8, no control characters."""

    MAX_BYTES = 512

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a string")
        if not _NOT_BLANK_RE.search(data):
            raise ValidationError("must not be empty", code="invalid_key")
        if len(data.encode()) > self.MAX_BYTES:
            raise ValidationError(f"must be at most {self.MAX_BYTES} bytes of UTF-8", code="invalid_key")
        if _CONTROL.search(data) or any(unicodedata.category(c) in ("Cc", "Cs") for c in data):
            raise ValidationError("must not contain control characters", code="invalid_key")
        return data

    def json_schema(self):
        # maxLength counts characters; the limit is bytes of UTF-8, so it is said in words too.
        return {"type": "string", "minLength": 1, "maxLength": self.MAX_BYTES, "pattern": _NO_CONTROL_NOT_BLANK}


class Choice(String):
    def __init__(self, choices, **kwargs):
        self.choices = tuple(choices)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if data not in self.choices:
            raise ValidationError(f"must be one of: {', '.join(self.choices)}", code="invalid_choice")
        return data

    def json_schema(self):
        return {"type": "string", "enum": list(self.choices)}


class Boolean(Typed):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise _type_error("true or false")
        return data

    def json_schema(self):
        return {"type": "boolean"}


class Integer(Typed):
    json_type = "integer"

    def __init__(self, *, min_value=None, max_value=None, **kwargs):
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        # JSON has one number type: 5.0 is the integer 5 (as JSON Schema has it), 5.5 is not an integer.
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            raise _type_error("an integer")
        _range(data, self.min_value, self.max_value)
        return data

    def json_schema(self):
        bounds = {"minimum": self.min_value, "maximum": self.max_value}
        return {"type": self.json_type, **{name: value for name, value in bounds.items() if value is not None}}


class Number(Integer):
    json_type = "number"

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _type_error("a number")
        _range(data, self.min_value, self.max_value)
        return float(data)


def _range(value, minimum, maximum):
    if minimum is not None and value < minimum:
        raise ValidationError(f"must be at least {minimum}", code="min_value")
    if maximum is not None and value > maximum:
        raise ValidationError(f"must be at most {maximum}", code="max_value")


class StringList(Typed):
    """A list of non-empty plain strings (of `choices`, when given); duplicates dropped, order kept."""

    def __init__(self, *, max_items, max_chars=256, choices=None, **kwargs):
        self.max_items, self.max_chars, self.choices = max_items, max_chars, choices
        super().__init__(**kwargs)

    def _item(self) -> String:
        if self.choices:
            return Choice(self.choices, max_chars=self.max_chars, allow_empty=False, plain=True)
        return String(max_chars=self.max_chars, allow_empty=False, plain=True)

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise _type_error("a list of strings")
        if len(data) > self.max_items:
            raise ValidationError(f"must hold at most {self.max_items} entries", code="max_length")
        item = self._item()
        seen = []
        for index, value in enumerate(data):
            try:
                value = item.to_internal_value(value)
            except ValidationError as exc:
                raise ValidationError({index: exc.detail}) from None
            if value not in seen:
                seen.append(value)
        return seen

    def to_representation(self, value):
        return list(value)

    def json_schema(self):
        return {"type": "array", "items": self._item().json_schema(), "maxItems": self.max_items}


class StringMap(Typed):
    """A JSON object of named strings (a record's fields): 1 to max_items names, each value non-blank."""

    def __init__(self, *, max_items=64, max_chars=4096, **kwargs):
        self.max_items, self.max_chars = max_items, max_chars
        super().__init__(**kwargs)

    def names(self) -> String:
        return String(max_chars=128, allow_empty=False, plain=True)

    def values(self) -> String:
        return String(max_chars=self.max_chars, allow_empty=False)

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise _type_error("an object of named strings")
        if not 1 <= len(data) <= self.max_items:
            raise ValidationError(f"must hold 1 to {self.max_items} names", code="invalid")
        name, text = self.names(), self.values()
        mapped = {}
        for key, value in data.items():
            try:
                name.to_internal_value(key)
            except ValidationError as exc:
                raise ValidationError(f"a name {key!r} {exc.detail[0]}", code=exc.detail[0].code) from None
            try:
                mapped[key] = text.to_internal_value(value)
            except ValidationError as exc:
                raise ValidationError({key: exc.detail}) from None
        return mapped

    def json_schema(self):
        return {
            "type": "object",
            "propertyNames": self.names().json_schema(),
            "additionalProperties": self.values().json_schema(),
            "minProperties": 1,
            "maxProperties": self.max_items,
        }


class TextPairs(Typed):
    """A list of [text, text] pairs (calibration.run's labelled pairs)."""

    def __init__(self, *, min_items, max_items, max_chars=2000, **kwargs):
        self.min_items, self.max_items, self.max_chars = min_items, max_items, max_chars
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise _type_error("a list of [text, text] pairs")
        if not self.min_items <= len(data) <= self.max_items:
            raise ValidationError(f"must hold {self.min_items} to {self.max_items} pairs", code="invalid")
        text = String(max_chars=self.max_chars, allow_empty=False)
        pairs = []
        for index, pair in enumerate(data):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValidationError({index: _type_error("a [text, text] pair").detail})
            if pair[0] == pair[1]:
                raise ValidationError({index: ["a pair of one text twice says nothing of the embedder"]})
            try:
                pairs.append((text.to_internal_value(pair[0]), text.to_internal_value(pair[1])))
            except ValidationError as exc:
                raise ValidationError({index: exc.detail}) from None
        return pairs

    def to_representation(self, value):
        return [list(pair) for pair in value]

    def json_schema(self):
        text = String(max_chars=self.max_chars, allow_empty=False).json_schema()
        pair = {"type": "array", "items": text, "minItems": 2, "maxItems": 2, "uniqueItems": True}
        return {"type": "array", "items": pair, "minItems": self.min_items, "maxItems": self.max_items}


class Triples(Typed):
    """(subject, relation, object) facts: a list of {"subject", "relation", "object"} objects."""

    PARTS = ("subject", "relation", "object")

    def __init__(self, *, max_items=64, **kwargs):
        self.max_items = max_items
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise _type_error("a list of {subject, relation, object} objects")
        if len(data) > self.max_items:
            raise ValidationError(f"must hold at most {self.max_items} triples", code="max_length")
        part = String(max_chars=256, allow_empty=False, plain=True)
        triples = []
        for index, triple in enumerate(data):
            if not isinstance(triple, dict):
                raise ValidationError({index: ["must be an object"]}, code="invalid_type")
            for name in sorted(set(triple) - set(self.PARTS)):
                raise ValidationError(
                    {index: {name: ["unknown field (allowed: subject, relation, object)"]}}, code="unknown_field"
                )
            values = []
            for name in self.PARTS:
                if name not in triple:
                    raise ValidationError({index: {name: ["this field is required"]}}, code="required")
                try:
                    values.append(part.to_internal_value(triple[name]))
                except ValidationError as exc:
                    raise ValidationError({index: {name: exc.detail}}) from None
            triples.append(values)
        return triples

    def to_representation(self, value):
        return [dict(zip(self.PARTS, triple)) for triple in value]

    def json_schema(self):
        part = String(max_chars=256, allow_empty=False, plain=True).json_schema()
        triple = {
            "type": "object",
            "properties": dict.fromkeys(self.PARTS, part),
            "required": list(self.PARTS),
            "additionalProperties": False,
        }
        return {"type": "array", "items": triple, "maxItems": self.max_items}


# The years ClickHouse's DateTime64 and Date32 hold. A time is judged by the year as written (what a schema's
# `pattern` can check); the few hours past an edge that a zone offset reaches are held at the edge.
YEARS = (1900, 2299)
_YEAR_PATTERN = r"^(19\d\d|2[0-2]\d\d)-"
_EARLIEST = datetime(YEARS[0], 1, 1, tzinfo=UTC)
_LATEST = datetime(YEARS[1], 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def _in_years(value):
    if not YEARS[0] <= value.year <= YEARS[1]:
        raise ValidationError(f"must be in the years {YEARS[0]} to {YEARS[1]}", code="invalid_value")


class Day(Typed):
    """A calendar date, YYYY-MM-DD."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a YYYY-MM-DD date string")
        try:
            day = date.fromisoformat(data)
        except ValueError:
            raise ValidationError("must be a date as YYYY-MM-DD", code="invalid_value") from None
        _in_years(day)
        return day

    def to_representation(self, value):
        return value.isoformat() if value else None

    def json_schema(self):
        return {"type": "string", "format": "date", "pattern": _YEAR_PATTERN}


class Timestamp(Typed):
    """An ISO 8601 date-time; one without a zone is read as UTC."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("an ISO 8601 date-time string")
        try:
            parsed = datetime.fromisoformat(data.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(
                "must be an ISO 8601 date-time, e.g. 2026-05-01T09:30:00Z", code="invalid_value"
            ) from None
        _in_years(parsed)
        utc = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        return min(max(utc, _EARLIEST), _LATEST)

    def to_representation(self, value):
        return value.isoformat().replace("+00:00", "Z") if value else None

    def json_schema(self):
        return {"type": "string", "format": "date-time", "pattern": _YEAR_PATTERN}
