"""The OpenAPI 3.1 document (GET /v1/schema): each op from what its view declares.

A view names its op, its input and output serializers, an example body and the refusals
particular to it; this module adds what every op shares (the error envelope for each
status, Retry-After) and teaches drf-spectacular our strict fields' types.
"""

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import ValidationError

from memories import outputs
from retrieval.errors import STATUS

# What any op may answer, whatever it does: the body, the token, the caller's rights, the input, the engine.
EVERY_OP = (
    "MALFORMED_JSON",
    "BODY_NOT_OBJECT",
    "UNAUTHENTICATED",
    "INVALID_TOKEN",
    "ORG_MISMATCH",
    "INVALID_NAMESPACE",
    "NAMESPACE_FORBIDDEN",
    "ROLE_FORBIDDEN",
    "BODY_TOO_LARGE",
    "MISSING_FIELD",
    "UNKNOWN_FIELD",
    "INVALID_TYPE",
    "INVALID_VALUE",
    "RATE_LIMITED",
    "CLICKHOUSE_UNAVAILABLE",
)
# An op that embeds text (a write, a query) may also hear from the embedding provider or the org's gateway.
EMBEDS = (
    "EMBED_TIMEOUT",
    "EMBEDDER_UNAVAILABLE",
    "MODEL_CALL_REFUSED",
    "MODEL_CALL_DEFERRED",
    "MODEL_CALLS_SWITCH_UNREAD",
)


class TypedFieldSchema(OpenApiSerializerFieldExtension):
    """Our strict request fields state their own schema (memories/fields.py)."""

    target_class = "memories.fields.Typed"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return self.target.json_schema()


class StrictSchema(OpenApiSerializerExtension):
    """A request body refuses fields it does not declare, and states its rules across fields."""

    target_class = "memories.inputs.Strict"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        if not vars(type(self.target)).get("__doc__"):
            schema.pop("description", None)  # a docstring inherited from a base describes the base
        rules = {"allOf": list(self.target.rules)} if self.target.rules else {}
        return {**schema, "additionalProperties": False, **rules}


class BatchSchema(OpenApiSerializerFieldExtension):
    target_class = "memories.inputs.Batch"

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "minItems": 1, "maxItems": self.target.limit}


SUCCESS = {200: "Done", 201: "Done; something was created", 202: "Accepted: it goes on; poll for its progress"}


def refusals_by_status(codes) -> dict[int, list[str]]:
    by_status = {}
    for code in sorted(set(codes), key=lambda code: (STATUS[code], code)):
        by_status.setdefault(STATUS[code], []).append(code)
    return by_status


def _accepts_empty(view) -> bool:
    """Whether the op takes `{}` (or no body at all): then a client need not send one."""
    try:
        view.validate({})
    except ValidationError:
        return False
    return True


class OpSchema(AutoSchema):
    """Documents each op from its view: serializers, example, refusals."""

    def get_request_serializer(self):
        return self.view.request_serializer

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body is not None:
            body["required"] = not _accepts_empty(self.view)
        return body

    def get_response_serializers(self):
        answers = {
            status: OpenApiResponse(self.view.response_serializer, SUCCESS[status]) for status in self.view.success
        }
        for status, codes in refusals_by_status(EVERY_OP + self.view.refusals).items():
            answers[status] = OpenApiResponse(outputs.ErrorOut, description=f"`error.code`: {', '.join(codes)}")
        return answers

    def get_override_parameters(self):
        return [
            OpenApiParameter(
                "Retry-After",
                OpenApiTypes.INT,
                OpenApiParameter.HEADER,
                response=[429, 503],
                description="Seconds to wait before retrying (rate limits; a deferring gateway).",
            )
        ]

    def get_examples(self):
        return [OpenApiExample(self.view.op, value=self.view.example, request_only=True)]

    def get_operation_id(self):
        return self.view.op

    def get_tags(self):
        return [self.view.op.split(".")[0]]
