"""A tool call, run as its op's REST request: through the same WSGI handler, middleware, authentication, tenancy,
rate limits, audit, metrics and error envelope as `POST /v1/<op>`. MCP is a second door onto the ops, not a second
code path; what a tool answers is what REST answers for the same body and token."""

import functools
import io
import json
import logging
from dataclasses import dataclass

from django.core.handlers.wsgi import WSGIHandler

from memories.views.base import MCP_TOOL
from retrieval.errors import Refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the MCP connection says: its bearer token, and where the call came from."""

    token: str
    host: str = "localhost"  # the Host the connection was made to: Django checks it against LOOM_ALLOWED_HOSTS
    remote_addr: str = ""  # the audit log's origin
    scheme: str = "http"
    namespace: str | None = None  # the connection's namespace, for a call that names none


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict

    @property
    def ok(self) -> bool:
        return self.status < 400


@functools.cache
def _handler() -> WSGIHandler:
    return WSGIHandler()  # (loads the middleware once, as a server process does)


def call(op: str, tool: str, arguments: dict, caller: Caller) -> Answer:
    """Run `op` with `arguments` as its JSON body, on behalf of `caller`; `tool` names the MCP tool for the trace
    log and the audit log's origin."""
    if caller.namespace and "namespace" not in arguments:
        arguments = {**arguments, "namespace": caller.namespace}
    body = json.dumps(arguments).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": f"/v1/{op}",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": caller.host,
        "HTTP_AUTHORIZATION": f"Bearer {caller.token}",
        "REMOTE_ADDR": caller.remote_addr,
        "SERVER_NAME": caller.host.rsplit(":", 1)[0],
        "SERVER_PORT": "0",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": caller.scheme,
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        MCP_TOOL: tool,
    }
    status = []
    response = _handler()(environ, lambda line, headers, exc_info=None: status.append(int(line.split()[0])))
    try:
        payload = b"".join(response)
    finally:
        response.close()  # (Django's request_finished: the thread's database connection is released)
    try:
        return Answer(status[0], json.loads(payload))
    except ValueError:  # (no op answers so; Django's own error pages, e.g. for a Host it refuses, are not JSON)
        refused = Refusal("INTERNAL_ERROR", f"the op answered {status[0]} without the envelope; it has been logged")
        log.error("%s answered %d without the envelope: %.200r", op, status[0], payload)
        return Answer(refused.status, refused.to_envelope())
