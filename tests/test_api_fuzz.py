"""The API under generated input (schemathesis, from the service's own OpenAPI schema).

Schema-valid bodies: every answer conforms to the schema (status, content type, body, headers) and the op
accepts them, except where a value is valid only if the service issued it. Schema-invalid bodies: refused with
a 4xx in the error envelope. Never a 5xx.
"""

import json
import os
import uuid

import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from retrieval.errors import STATUS

# Per op, mode and backend: the run in `make test` stays near a minute, and draws the same bodies every run (a
# red CI run names a change, not a lucky draw); bench/fuzz.sh asks for many more, drawn afresh each time. Not a
# LOOM_ variable: the test settings clear those before this module loads.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
FRESH = "FUZZ_EXAMPLES" in os.environ

# Refusals of schema-valid input that JSON Schema cannot rule out (the schema says them in words).
BEYOND_SCHEMA = {
    "INVALID_CURSOR": "a cursor must be one the service handed out",
    ("INVALID_VALUE", "a"): "a configuration must be one the run has",
    ("INVALID_VALUE", "b"): "a configuration must be one the run has",
    ("INVALID_VALUE", "against"): "two runs compare over the same questions",
    ("INVALID_VALUE", "wait"): "a set may hold more searches than one request waits for",
}


def test_no_input_gets_a_5xx_an_answer_off_the_schema_or_outside_the_envelope(backend, alice):
    # Django's own WSGI app: loom_site.wsgi would also start the server's workers in the test process.
    schema = schemathesis.openapi.from_wsgi("/v1/schema?format=json", get_wsgi_application())
    # Schema-invalid input may also be refused as too large (413: a value over its configured bytes).
    schema.config.checks.negative_data_rejection.expected_statuses = [
        str(status) for status in sorted(set(STATUS.values())) if 400 <= status < 500
    ]
    headers = {"Authorization": f"Bearer {alice.token('admin')}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20

    for operation in operations:
        # GET /v1/health takes nothing to get wrong.
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)[: 2 if operation.method == "post" else 1]:
            fuzz(operation, mode, headers)


def fuzz(operation, mode: GenerationMode, headers: dict):
    @given(case=operation.as_strategy(mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=not FRESH,
        suppress_health_check=list(HealthCheck),
    )
    def answered(case):
        label = (case.operation.label, mode.value, case.body)
        response = case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])
        assert response.status_code < 500, (*label, response.text[:500])
        if response.status_code >= 400:
            error = response.json()["error"]
            assert error["code"] in STATUS and error["message"], (*label, error)
            if mode is GenerationMode.POSITIVE and response.status_code == 422:
                assert error["code"] in BEYOND_SCHEMA or (error["code"], error.get("field")) in BEYOND_SCHEMA, (
                    *label,
                    error,
                )

    answered()


def test_a_lone_surrogate_or_deep_nesting_anywhere_is_refused_naming_where(backend, alice):
    """Schema-valid bodies of every op, one string in each made a lone surrogate (valid JSON, no UTF-8 text) or one
    value buried past 32 levels (up to the decoder's own limit and beyond): each refused, the surrogate with 422
    INVALID_VALUE naming where it is, the nesting with 400 MALFORMED_JSON; never a 5xx."""
    schema = schemathesis.openapi.from_wsgi("/v1/schema?format=json", get_wsgi_application())
    client, token = Client(), alice.token("admin")
    for operation in (result.ok() for result in schema.get_all_operations()):
        if operation.method != "post":
            continue

        @given(case=operation.as_strategy(GenerationMode.POSITIVE), data=st.data())
        @settings(
            max_examples=max(EXAMPLES // 2, 3),
            deadline=None,
            database=None,
            derandomize=not FRESH,
            suppress_health_check=list(HealthCheck),
        )
        def refused(case, data):
            body = case.body if isinstance(case.body, dict) else {}
            places = list(_values(body))
            if data.draw(st.booleans(), "surrogate") and (texts := [p for p in places if isinstance(p[2], str)]):
                path, route, text = data.draw(st.sampled_from(texts), "where")
                at = data.draw(st.integers(0, len(text)), "at")
                raw = json.dumps(_put(body, route, text[:at] + "\ud800" + text[at:]))
                expected = (422, "INVALID_VALUE", path)
            else:
                path, route, value = data.draw(st.sampled_from(places or [("", [], body)]), "where")
                depth = data.draw(st.sampled_from([33, 200, 2_000]), "depth")
                marker = f"__buried_{uuid.uuid4().hex}__"
                raw = json.dumps(_put(body, route, marker) if route else {"buried": marker}).replace(
                    json.dumps(marker), "[" * depth + json.dumps(value) + "]" * depth
                )
                expected = (400, "MALFORMED_JSON", None)
            answer = client.post(
                case.formatted_path, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
            )
            error = answer.json().get("error", {})
            got = (answer.status_code, error.get("code"), error.get("field") if expected[2] else None)
            assert got == expected, (case.operation.label, raw[:300], answer.json())

        refused()


def _values(value, path: str = "", route: tuple = ()):
    """(path as an error names it, route of keys and indexes, value) of every value in a body."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        yield where, [*route, key], item
        yield from _values(item, where, (*route, key))


def _put(body, route: list, value):
    """A copy of `body` with the value at `route` replaced."""
    if not route:
        return value
    copy = dict(body) if isinstance(body, dict) else list(body)
    copy[route[0]] = _put(body[route[0]], route[1:], value)
    return copy
