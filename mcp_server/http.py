"""POST /mcp: the SDK's streamable HTTP transport, served inside the Django app (one process, no second server).

The transport is ASGI; the site is WSGI (gunicorn's threads). The SDK app runs stateless with JSON answers (each
POST carries one call and gets its answer: nothing to hold between requests, any worker may serve any call) on
one event loop per process, which a2wsgi bridges to this view. The door refuses a request without a valid bearer
token, and a body over LOOM_REQUEST_MAX_BYTES, before the SDK sees it (the envelope, as /v1 answers); each tool
call then runs as its op with that token (`dispatch`): the same tenancy, roles, rate limits and audit.
"""

import asyncio
import io
import threading

from a2wsgi import ASGIMiddleware
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated

from mcp_server import dispatch, server
from memories.errors import refusal_of
from tenancy.auth import BearerTokenAuthentication

_lock = threading.Lock()
_bridge: ASGIMiddleware | None = None


def _caller(ctx: ServerRequestContext) -> dispatch.Caller:
    request = ctx.request  # the Starlette request a2wsgi made of the one this view passed on
    return dispatch.Caller(
        token=request.headers["authorization"].partition(" ")[2].strip(),
        host=request.headers.get("host", "localhost"),
        remote_addr=request.client.host if request.client else "",
        scheme=request.url.scheme,
        namespace=request.query_params.get("namespace") or request.headers.get("x-loom-namespace"),
    )


def _started() -> ASGIMiddleware:
    """The SDK's app and the event loop it runs on, made on the first request (in the serving process, after
    gunicorn's fork)."""
    global _bridge
    with _lock:
        if _bridge is None:
            mcp = server.build(_caller)
            # Django checks the Host (LOOM_ALLOWED_HOSTS) and the door the token: the SDK's own Host and Origin
            # check would refuse the names an operator allowed.
            app = mcp.streamable_http_app(
                stateless_http=True,
                json_response=True,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            loop, ready = asyncio.new_event_loop(), threading.Event()

            async def serve():
                async with mcp.session_manager.run():
                    ready.set()
                    await asyncio.Event().wait()  # for the life of the process

            threading.Thread(target=loop.run_until_complete, args=(serve(),), name="loom-mcp", daemon=True).start()
            ready.wait()
            _bridge = ASGIMiddleware(app, loop=loop)
        return _bridge


@csrf_exempt
def endpoint(request: HttpRequest) -> HttpResponse:
    request.get_host()  # a Host outside LOOM_ALLOWED_HOSTS is refused here (400), as for any page
    try:
        if BearerTokenAuthentication().authenticate(request) is None:
            raise NotAuthenticated()
        body = request.body  # (LOOM_REQUEST_MAX_BYTES holds here as for /v1)
    except (NotAuthenticated, AuthenticationFailed, RequestDataTooBig) as exc:
        refusal = refusal_of(exc)
        refused = JsonResponse(refusal.to_envelope(), status=refusal.status)
        if refusal.status == 401:
            refused["WWW-Authenticate"] = 'Bearer realm="loom"'
        return refused
    environ = {**request.environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
    environ.setdefault("REMOTE_PORT", "0")  # (a2wsgi names the client only with a port: the audit reads its address)
    environ["PATH_INFO"], environ["SCRIPT_NAME"] = "/mcp", ""
    started = []
    chunks = _started()(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    content = b"".join(chunks)
    status, headers = started[0]
    response = HttpResponse(content, status=int(status.split()[0]))
    for name, value in headers:
        if name.lower() not in ("content-length", "connection"):
            response[name] = value
    return response
