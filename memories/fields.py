"""Strict request fields: a wrong JSON type is an error, never coerced.

DRF's stock fields turn `5` into `"5"` and `"yes"` into `True`; an agent that
sends the wrong type should hear about it.
"""

import re
import unicodedata
from datetime import UTC, date, datetime

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _type_error(expected: str):
    return ValidationError(f"must be {expected}", code="invalid_type")


class String(serializers.Field):
    def __init__(self, *, max_chars=None, max_bytes=None, allow_empty=True, plain=False, **kwargs):
        self.max_chars, self.max_bytes = max_chars, max_bytes
        self.allow_empty, self.plain = allow_empty, plain
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a string")
        if not self.allow_empty and not data.strip():
            raise ValidationError("must not be empty", code="empty")
        if self.max_chars is not None and len(data) > self.max_chars:
            raise ValidationError(f"must be at most {self.max_chars} characters", code="max_length")
        if self.max_bytes is not None and len(data.encode()) > self.max_bytes:
            raise ValidationError(f"must be at most {self.max_bytes} bytes", code="max_length")
        if self.plain and _CONTROL.search(data):
            raise ValidationError("must not contain control characters", code="control_characters")
        return data

    def to_representation(self, value):
        return value


class MemoryKey(String):
    """Non-empty, at most 512 bytes of UTF-8, no control characters."""

    MAX_BYTES = 512

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a string")
        if not data.strip():
            raise ValidationError("must not be empty", code="invalid_key")
        if len(data.encode()) > self.MAX_BYTES:
            raise ValidationError(f"must be at most {self.MAX_BYTES} bytes of UTF-8", code="invalid_key")
        if _CONTROL.search(data) or any(unicodedata.category(c) in ("Cc", "Cs") for c in data):
            raise ValidationError("must not contain control characters", code="invalid_key")
        return data


class Choice(String):
    def __init__(self, choices, **kwargs):
        self.choices = tuple(choices)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if data not in self.choices:
            raise ValidationError(f"must be one of: {', '.join(self.choices)}", code="invalid_choice")
        return data


class Boolean(serializers.Field):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise _type_error("true or false")
        return data

    def to_representation(self, value):
        return value


class Integer(serializers.Field):
    def __init__(self, *, min_value=None, max_value=None, **kwargs):
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            raise _type_error("an integer")
        _range(data, self.min_value, self.max_value)
        return data

    def to_representation(self, value):
        return value


class Number(Integer):
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


class StringList(serializers.Field):
    """A list of non-empty plain strings; duplicates dropped, order kept."""

    def __init__(self, *, max_items, max_chars=256, **kwargs):
        self.max_items, self.max_chars = max_items, max_chars
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise _type_error("a list of strings")
        if len(data) > self.max_items:
            raise ValidationError(f"must hold at most {self.max_items} entries", code="max_length")
        item = String(max_chars=self.max_chars, allow_empty=False, plain=True)
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


class TextPairs(serializers.Field):
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
            try:
                pairs.append((text.to_internal_value(pair[0]), text.to_internal_value(pair[1])))
            except ValidationError as exc:
                raise ValidationError({index: exc.detail}) from None
        return pairs

    def to_representation(self, value):
        return [list(pair) for pair in value]


class Triples(serializers.Field):
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


class Day(serializers.Field):
    """A calendar date, YYYY-MM-DD."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise _type_error("a YYYY-MM-DD date string")
        try:
            return date.fromisoformat(data)
        except ValueError:
            raise ValidationError("must be a date as YYYY-MM-DD", code="invalid_value") from None

    def to_representation(self, value):
        return value.isoformat() if value else None


class Timestamp(serializers.Field):
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
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

    def to_representation(self, value):
        return value.isoformat().replace("+00:00", "Z") if value else None
