"""The one refusal type: a failure the caller can act on, with its envelope code, message, field and status.

Raised anywhere (the retrieval layer, tenancy, the REST views, the Lab); REST and the
Lab both render it with `to_envelope()`, so one input gets one answer everywhere.
`memories.errors.refusal_of` turns the other known failures (validation, outages,
providers) into one.
"""

# Every envelope code and its HTTP status.
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
    "EVAL_SET_NOT_FOUND": 404,
    "EVAL_RUN_NOT_FOUND": 404,
    "JOB_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "MEMORY_PINNED": 409,
    "CALIBRATION_UNAVAILABLE": 409,
    "MODEL_CALLS_OFF": 409,
    "READS_LLM_FREE": 409,
    "BODY_TOO_LARGE": 413,
    "VALUE_TOO_LARGE": 413,
    "MISSING_FIELD": 422,
    "UNKNOWN_FIELD": 422,
    "INVALID_TYPE": 422,
    "INVALID_VALUE": 422,
    "INVALID_KEY": 422,
    "INVALID_NAMESPACE": 422,
    "INVALID_CURSOR": 422,
    "TOO_MANY_ITEMS": 422,  # a list over its schema's maxItems: a validation failure like any other
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
    "CLICKHOUSE_UNAVAILABLE": 503,
    "EMBED_TIMEOUT": 503,
    "MODEL_CALLS_SWITCH_UNREAD": 503,
    "MODEL_CALL_UNATTRIBUTED": 500,
    "MODEL_CALL_REFUSED": 403,
    "MODEL_CALL_DEFERRED": 503,
    "EMBEDDER_UNAVAILABLE": 503,
}


class Refusal(Exception):
    """`{"error": {"code", "message", "field", ...details}}` with `status` (by default the code's)."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int | None = None, **details):
        super().__init__(message)
        self.code, self.message, self.field = code, message, field
        self.status = status or STATUS[code]
        self.details = details

    def to_envelope(self) -> dict:
        body = {"code": self.code, "message": self.message, **self.details}
        if self.field:
            body["field"] = self.field
        return {"error": body}
