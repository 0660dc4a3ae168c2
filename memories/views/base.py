"""What every /v1 op shares: `OpView.post` reads the JSON body (`read_json`), validates it with the op's input
serializer, authorizes the (org, namespace) it addresses, runs the op and answers with its output serializer."""

import functools
import json
import re

from rest_framework import permissions, serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from memories import inputs, outputs
from memories.schema import OpSchema
from retrieval.errors import Refusal
from retrieval.providers import costs
from tenancy import limits
from tenancy.access import Scope, authorize
from tenancy.roles import Role

# The WSGI environ key naming the MCP tool an op was called through (mcp_server/dispatch.py): the trace log shows it.
# No HTTP header can set it (a header becomes an HTTP_ key).
MCP_TOOL = "loom.mcp_tool"


class HasToken(permissions.BasePermission):
    """A token, within its rate limit (tenancy/limits.py)."""

    def has_permission(self, request, view):
        if request.auth is None:
            raise NotAuthenticated()
        limits.check(request.auth.subject)
        return True


def read_json(request) -> dict:
    """The body as a JSON object, whatever Content-Type says (curl -d sends a form type), nested at most MAX_DEPTH
    deep and holding only text UTF-8 can carry."""
    raw = request._request.body  # raises RequestDataTooBig past LOOM_REQUEST_MAX_BYTES
    try:
        body = json.loads(raw or b"{}", parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refusal("MALFORMED_JSON", f"the body is not valid JSON: {exc}") from None
    except RecursionError:  # the decoder's own limit, near a thousand levels
        raise Refusal("MALFORMED_JSON", f"the body nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(body, dict):
        raise Refusal("BODY_NOT_OBJECT", "the body must be a JSON object")
    _walk(body, "", 1, _SURROGATE_ESCAPE.search(raw) is not None)
    return body


MAX_DEPTH = 32  # no op's body nests past a handful of levels; the checks after parsing recurse no further


# A lone surrogate (\ud800) is valid JSON but no UTF-8 text: it would fail every insert and embed. A pair written as
# escapes (\ud83d\ude00) decodes to one character and passes.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _walk(value, path: str, depth: int, surrogates: bool) -> None:
    """Refuse a body nested past MAX_DEPTH, and (when its bytes hold a surrogate escape) any string in it that
    UTF-8 cannot carry, naming where (`items[3].tags[1]`)."""
    if depth > MAX_DEPTH:
        raise Refusal("MALFORMED_JSON", f"the body nests deeper than {MAX_DEPTH} levels", path or None)
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if surrogates:
                _utf8(key, where)
            _walk(item, where, depth + 1, surrogates)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth + 1, surrogates)
    elif surrogates and isinstance(value, str):
        _utf8(value, path)


def _utf8(text: str, where: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        found = text[exc.start].encode("unicode_escape").decode()
        raise Refusal("INVALID_VALUE", f"must be UTF-8 text: it holds a lone surrogate ({found})", where) from None


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def held(scope: Scope, data: dict) -> Scope:
    """The scope of a read by key or listing (inputs.HeldRead), held to the user and session it names under its
    read_scope (Scope.reading); the fields leave `data`."""
    return scope.reading(data.pop("read_scope", None), data.pop("user_id", None), data.pop("session_id", None))


@functools.cache
def _writer(serializer_class: type) -> serializers.Serializer:
    """One instance of each output serializer, made once: DRF deep-copies every declared field each time a
    serializer is made (a large share of a search's answer: docs/benchmarks.md), and an output serializer keeps no
    state between answers."""
    return serializer_class()


class OpView(APIView):
    op: str
    role: Role = Role.VIEWER
    request_serializer: type = inputs.OpInput
    response_serializer: type = outputs.MemoryOut
    # For the schema (memories/schema.py): the statuses a success answers with, the refusals particular to this op
    # (beyond those every op may give), and a body that succeeds when sent as-is in the order the ops are listed.
    success: tuple[int, ...] = (200,)
    refusals: tuple[str, ...] = ()
    example: dict = {}
    permission_classes = [HasToken]
    # Declares JSON bodies for the schema; the body itself is read by read_json.
    parser_classes = [JSONParser]
    schema = OpSchema()

    def post(self, request):
        body = read_json(request)
        data = self.validate(body)
        scope = authorize(request.auth, data.pop("org", None), data.pop("namespace"), self.role)
        return self.metered_run(scope, data)

    def metered_run(self, scope: Scope, data: dict) -> Response:
        """Run the op; if it reached a model provider, its usage becomes one agent_events row."""
        with costs.accounted(scope.org, scope.namespace, self.op, scope.subject):
            return self.run(scope, data)

    def validate(self, body: dict) -> dict:
        serializer = self.request_serializer(data=body)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def run(self, scope: Scope, data: dict) -> Response:
        raise NotImplementedError

    @property
    def called_as(self) -> str:
        """The name the caller used: the MCP tool's for a tool call (what the trace log shows), else the op's."""
        return self.request.META.get(MCP_TOOL) or self.op

    def answer(self, payload, serializer=None, status=200) -> Response:
        return Response(_writer(serializer or self.response_serializer).to_representation(payload), status=status)

    def answer_written(self, results: list, serializer=None) -> Response:
        """A write batch's results: 201 when it created something, else 200."""
        status = 201 if any(result.outcome == "created" for result in results) else 200
        return self.answer({"items": results, "count": len(results)}, serializer, status)
