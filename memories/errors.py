"""The error envelope: `{"error": {"code", "message", "field"}}`, one status per code.

Every failure of a /v1 op leaves through `exception_handler`: bad input gets
its own code and names the field; an unexpected exception is logged and
answered with a generic 500, never a traceback.
"""

import logging
import math

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions
from rest_framework.response import Response

from retrieval.errors import Refusal
from retrieval.providers import customer, remote
from retrieval.store.clickhouse import ClickHouseUnavailable
from retrieval.store.reads import BadCursor

log = logging.getLogger(__name__)


# DRF's validation codes (and our fields' own) to envelope codes.
_VALIDATION = {
    "required": "MISSING_FIELD",
    "unknown_field": "UNKNOWN_FIELD",
    "invalid_type": "INVALID_TYPE",
    "null": "INVALID_TYPE",
    "not_a_list": "INVALID_TYPE",
    "not_a_dict": "INVALID_TYPE",
    "value_too_large": "VALUE_TOO_LARGE",
    "too_many_items": "TOO_MANY_ITEMS",
    "invalid_key": "INVALID_KEY",
}


def error_response(code: str, message: str, field: str | None = None, status: int | None = None, **more) -> Response:
    refusal = Refusal(code, message, field, status, **more)
    return Response(refusal.to_envelope(), status=refusal.status)


def first_error(detail, path: str = "") -> tuple[str, object]:
    """The first (field path, ErrorDetail) of a DRF error tree: `items[3].memory_key`."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if value:
                if key == "non_field_errors":
                    name = path
                elif isinstance(key, int):
                    name = f"{path}[{key}]"
                else:
                    name = f"{path}.{key}" if path else key
                return first_error(value, name)
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)) and value:
                return first_error(value, f"{path}[{index}]")
            if value and not isinstance(value, (dict, list)):
                return path, value
    return path, detail


def refusal_of(exc: Exception) -> Refusal | None:
    """The refusal a known failure stands for (None: an unexpected one). REST and the Lab both read it."""
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, exceptions.ValidationError):
        field, detail = first_error(exc.detail)
        code = _VALIDATION.get(getattr(detail, "code", ""), "INVALID_VALUE")
        return Refusal(code, f"{field}: {detail}" if field else str(detail), field or None)
    if isinstance(exc, BadCursor):
        return Refusal("INVALID_CURSOR", str(exc), "cursor")
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        missing = isinstance(exc, exceptions.NotAuthenticated)
        return Refusal(
            "UNAUTHENTICATED" if missing else "INVALID_TOKEN",
            "send Authorization: Bearer <token>" if missing else str(exc.detail),
        )
    if isinstance(exc, exceptions.MethodNotAllowed):
        return Refusal("METHOD_NOT_ALLOWED", str(exc.detail))
    if isinstance(exc, RequestDataTooBig):
        return Refusal("BODY_TOO_LARGE", "the request body is larger than LOOM_REQUEST_MAX_BYTES")
    if isinstance(exc, ClickHouseUnavailable):  # logged as the outage begins and ends (retrieval/store/clickhouse.py)
        return Refusal("CLICKHOUSE_UNAVAILABLE", "ClickHouse is unavailable; retry shortly")
    if isinstance(exc, (customer.GatewayDeferred, customer.GatewayRefused)):
        return Refusal(exc.code, str(exc), gateway_status=exc.gateway_status, gateway_code=exc.gateway_code)
    if isinstance(exc, customer.ModelCallRefused):
        return Refusal(exc.code, str(exc))
    if isinstance(exc, remote.EmbedTimeout):
        return Refusal("EMBED_TIMEOUT", f"{exc}; retry shortly")
    if isinstance(exc, remote.InputTooLong):
        return Refusal("VALUE_TOO_LARGE", str(exc), "value")
    if isinstance(exc, remote.ProviderError):
        log.error("embedding provider failed: %s", exc)
        return Refusal("EMBEDDER_UNAVAILABLE", f"the embedding provider failed ({exc}); retry shortly")
    if isinstance(exc, exceptions.APIException):
        return Refusal("INVALID_VALUE", str(exc.detail), status=exc.status_code)
    return None


def exception_handler(exc, context):
    refusal = refusal_of(exc)
    if refusal is None:
        log.exception("unhandled error in %s", context.get("view").__class__.__name__)
        refusal = Refusal("INTERNAL_ERROR", "an internal error occurred; it has been logged")
    response = Response(refusal.to_envelope(), status=refusal.status)
    if refusal.code in ("UNAUTHENTICATED", "INVALID_TOKEN"):
        response["WWW-Authenticate"] = 'Bearer realm="loom"'
    if isinstance(exc, customer.GatewayDeferred):
        response["Retry-After"] = f"{exc.retry_after:g}"
    if refusal.code == "RATE_LIMITED":  # whole seconds, as HTTP has them; the envelope's retry_after is exact
        response["Retry-After"] = str(math.ceil(refusal.details["retry_after"]))
    if refusal.code == "CLICKHOUSE_UNAVAILABLE":
        outage(response)
    return response


# How soon a client may try again during a ClickHouse outage: a restart or a thaw takes seconds.
OUTAGE_RETRY_AFTER_S = 5


def outage(response):
    """A 503 for a ClickHouse outage: it says when to retry, and is not logged again per request (the outage logs
    one line as it begins and one as it ends: retrieval/store/clickhouse.py)."""
    response["Retry-After"] = str(OUTAGE_RETRY_AFTER_S)
    response._has_been_logged = True  # Django's own mark: django.request logs no ERROR line for it
    return response
