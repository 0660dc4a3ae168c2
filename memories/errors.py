"""The error envelope: `{"error": {"code", "message", "field"}}`, one status per code.

Every failure of a /v1 op leaves through `exception_handler`: bad input gets
its own code and names the field; an unexpected exception is logged and
answered with a generic 500, never a traceback.
"""

import logging

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions
from rest_framework.response import Response

from retrieval.clickhouse import ClickHouseUnavailable
from retrieval.providers import customer, remote
from retrieval.reads import BadCursor
from retrieval.errors import Rejected
from tenancy.access import AccessDenied

log = logging.getLogger(__name__)

STATUS = {
    "MALFORMED_JSON": 400,
    "BODY_NOT_OBJECT": 400,
    "UNAUTHENTICATED": 401,
    "INVALID_TOKEN": 401,
    "ORG_MISMATCH": 403,
    "NAMESPACE_FORBIDDEN": 403,
    "ROLE_FORBIDDEN": 403,
    "UNKNOWN_OP": 404,
    "MEMORY_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "MEMORY_PINNED": 409,
    "CALIBRATION_UNAVAILABLE": 409,
    "MODEL_CALLS_OFF": 409,
    "READS_LLM_FREE": 409,
    "BODY_TOO_LARGE": 413,
    "VALUE_TOO_LARGE": 413,
    "TOO_MANY_ITEMS": 413,
    "MISSING_FIELD": 422,
    "UNKNOWN_FIELD": 422,
    "INVALID_TYPE": 422,
    "INVALID_VALUE": 422,
    "INVALID_KEY": 422,
    "INVALID_NAMESPACE": 422,
    "INVALID_CURSOR": 422,
    "DUPLICATE_ITEM": 422,
    "INTERNAL_ERROR": 500,
    "CLICKHOUSE_UNAVAILABLE": 503,
    "EMBED_TIMEOUT": 503,
    "MODEL_CALLS_SWITCH_UNREAD": 503,
    "MODEL_CALL_UNATTRIBUTED": 500,
    "MODEL_CALL_REFUSED": 403,
    "MODEL_CALL_DEFERRED": 503,
    "EMBEDDER_UNAVAILABLE": 503,
}

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
    "duplicate_item": "DUPLICATE_ITEM",
}


class ApiError(Exception):
    def __init__(self, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


def error_response(code: str, message: str, field: str | None = None, status: int | None = None,
                   **more) -> Response:  # fmt: skip
    body = {"code": code, "message": message, **more}
    if field:
        body["field"] = field
    return Response({"error": body}, status=status or STATUS[code])


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


def exception_handler(exc, context):
    if isinstance(exc, ApiError):
        return error_response(exc.code, exc.message, exc.field)
    if isinstance(exc, exceptions.ValidationError):
        field, detail = first_error(exc.detail)
        code = _VALIDATION.get(getattr(detail, "code", ""), "INVALID_VALUE")
        return error_response(code, f"{field}: {detail}" if field else str(detail), field or None)
    if isinstance(exc, AccessDenied):
        return error_response(exc.code, exc.message, exc.field)
    if isinstance(exc, Rejected):
        return error_response(exc.code, exc.message, exc.field, exc.status)
    if isinstance(exc, BadCursor):
        return error_response("INVALID_CURSOR", str(exc), "cursor")
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        missing = isinstance(exc, exceptions.NotAuthenticated)
        response = error_response(
            "UNAUTHENTICATED" if missing else "INVALID_TOKEN",
            "send Authorization: Bearer <token>" if missing else str(exc.detail),
        )
        response["WWW-Authenticate"] = 'Bearer realm="loom"'
        return response
    if isinstance(exc, exceptions.MethodNotAllowed):
        return error_response("METHOD_NOT_ALLOWED", str(exc.detail))
    if isinstance(exc, RequestDataTooBig):
        return error_response("BODY_TOO_LARGE", "the request body is larger than LOOM_REQUEST_MAX_BYTES")
    if isinstance(exc, ClickHouseUnavailable):
        log.error("ClickHouse unavailable: %s", exc)
        return error_response("CLICKHOUSE_UNAVAILABLE", "ClickHouse is unavailable; retry shortly")
    if isinstance(exc, customer.GatewayDeferred):
        response = error_response(exc.code, str(exc), gateway_status=exc.gateway_status, gateway_code=exc.gateway_code)
        response["Retry-After"] = f"{exc.retry_after:g}"
        return response
    if isinstance(exc, customer.GatewayRefused):
        return error_response(exc.code, str(exc), gateway_status=exc.gateway_status, gateway_code=exc.gateway_code)
    if isinstance(exc, customer.ModelCallRefused):
        return error_response(exc.code, str(exc))
    if isinstance(exc, remote.EmbedTimeout):
        return error_response("EMBED_TIMEOUT", f"{exc}; retry shortly")
    if isinstance(exc, remote.InputTooLong):
        return error_response("VALUE_TOO_LARGE", str(exc), "value")
    if isinstance(exc, remote.ProviderError):
        log.error("embedding provider failed: %s", exc)
        return error_response("EMBEDDER_UNAVAILABLE", f"the embedding provider failed ({exc}); retry shortly")
    if isinstance(exc, exceptions.APIException):
        return error_response("INVALID_VALUE", str(exc.detail), status=exc.status_code)
    log.exception("unhandled error in %s", context.get("view").__class__.__name__)
    return error_response("INTERNAL_ERROR", "an internal error occurred; it has been logged")
