"""The clients: `Client` (sync) and `AsyncClient`, each an httpx client plus the ops of `_ops.py`.

Both send an op as `POST /v1/<op>` with the token, add the client's namespace to a body that names none, retry a
429 or 503 after its Retry-After (or a short backoff), and raise `LoomError` for any refusal.
"""

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Unpack

import httpx

from loom_recall._ops import (
    IN_NAMESPACE,
    AsyncOps,
    HealthOut,
    ListItemOut,
    MemoryList,
    MemorySearch,
    Ops,
    SearchHitOut,
    SearchTraceLog,
    TraceLogRowOut,
)

DEFAULT_URL = "http://127.0.0.1:8000"
RETRIED = (429, 503)  # a rate limit, an outage or a deferring gateway: nothing was done, so sending again is safe


class LoomError(Exception):
    """A refusal: the envelope's `code` (branch on it), `message` (for people), `field` (the input at fault),
    the HTTP `status`, and what else the envelope says (`details`, e.g. retry_after)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, details: dict | None = None):
        super().__init__(f"{code}: {message}" + (f" ({field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field
        self.details = details or {}


def _refusal(response: httpx.Response) -> LoomError:
    try:
        error = dict(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return LoomError(response.status_code, "HTTP_ERROR", response.text[:500] or response.reason_phrase)
    return LoomError(response.status_code, error.pop("code"), error.pop("message"), error.pop("field", None), error)


def _answer(response: httpx.Response) -> Any:
    if response.is_success:
        return response.json()
    raise _refusal(response)


def _wait(response: httpx.Response, attempt: int, retries: int) -> float | None:
    """Seconds to wait before sending again, or None: answer as it is."""
    if response.status_code not in RETRIED or attempt >= retries:
        return None
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return min(8.0, 0.5 * 2**attempt)


class _Config:
    def __init__(self, base_url: str | None, token: str | None, namespace: str, timeout: float, retries: int):
        token = token or os.environ.get("LOOM_TOKEN")
        if not token:
            raise ValueError("no token: pass token= or set LOOM_TOKEN (python manage.py loom_token create ...)")
        self.base_url = (base_url or os.environ.get("LOOM_URL") or DEFAULT_URL).rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.namespace, self.timeout, self.retries = namespace, timeout, retries

    def body(self, op: str, body: dict) -> dict:
        return {"namespace": self.namespace, **body} if op in IN_NAMESPACE else body


# Paged reads: (op, the answer's list, how the next request follows from the last answer, or None at the end).
_PAGES: dict[str, tuple[str, Callable[[dict, dict], dict | None]]] = {
    "memory.list": ("items", lambda body, page: page["next_cursor"] and {**body, "cursor": page["next_cursor"]}),
    "memory.search": (
        "hits",
        lambda body, page: page["next"] and {"namespace": body["namespace"], "page": page["next"]},
    ),
    "memory.search_trace_log": (
        "rows",
        lambda body, page: page["next_before"] and {**body, "before": page["next_before"]},
    ),
}


class _Client:
    """Loom Recall over HTTP. `base_url` defaults to LOOM_URL (else http://127.0.0.1:8000), `token` to LOOM_TOKEN;
    ops without a `namespace` address `namespace`. A refusal raises LoomError; 429 and 503 are retried up to
    `retries` times."""

    transport: type

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        namespace: str = "default",
        timeout: float = 30.0,
        retries: int = 3,
    ):
        self._config = _Config(base_url, token, namespace, timeout, retries)
        self._http = self.transport(base_url=self._config.base_url, headers=self._config.headers, timeout=timeout)


class Client(_Client, Ops):
    __doc__ = _Client.__doc__
    transport = httpx.Client

    def _op(self, op: str, body: dict) -> Any:
        body = self._config.body(op, body)
        for attempt in range(self._config.retries + 1):
            response = self._http.post(f"/v1/{op}", json=body)
            if (wait := _wait(response, attempt, self._config.retries)) is None:
                break
            time.sleep(wait)
        return _answer(response)

    def health(self) -> HealthOut:
        """GET /v1/health: `status` for anyone; an admin token also sees what stands behind it."""
        response = self._http.get("/v1/health")
        return response.json() if response.status_code in (200, 503) else _answer(response)

    def _paged(self, op: str, body: dict) -> Iterator[Any]:
        items, following = _PAGES[op]
        body = self._config.body(op, body)
        while body:
            page = self._op(op, body)
            yield from page[items]
            body = following(body, page)

    def iter_memories(self, **body: Unpack[MemoryList]) -> Iterator[ListItemOut]:
        """Every key memory.list lists, page after page."""
        return self._paged("memory.list", dict(body))

    def iter_search(self, **body: Unpack[MemorySearch]) -> Iterator[SearchHitOut]:
        """Every hit of a search, window after window (memory.search with paging=true)."""
        return self._paged("memory.search", {**body, "paging": True})

    def iter_trace_log(self, **body: Unpack[SearchTraceLog]) -> Iterator[TraceLogRowOut]:
        """The search trace log, newest first, page after page."""
        return self._paged("memory.search_trace_log", dict(body))

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncClient(_Client, AsyncOps):
    """`Client` for asyncio: the same ops and arguments, awaited; `async for` over the iter_ helpers."""

    transport = httpx.AsyncClient

    async def _op(self, op: str, body: dict) -> Any:
        body = self._config.body(op, body)
        for attempt in range(self._config.retries + 1):
            response = await self._http.post(f"/v1/{op}", json=body)
            if (wait := _wait(response, attempt, self._config.retries)) is None:
                break
            await asyncio.sleep(wait)
        return _answer(response)

    async def health(self) -> HealthOut:
        """GET /v1/health: `status` for anyone; an admin token also sees what stands behind it."""
        response = await self._http.get("/v1/health")
        return response.json() if response.status_code in (200, 503) else _answer(response)

    async def _paged(self, op: str, body: dict) -> AsyncIterator[Any]:
        items, following = _PAGES[op]
        body = self._config.body(op, body)
        while body:
            page = await self._op(op, body)
            for item in page[items]:
                yield item
            body = following(body, page)

    def iter_memories(self, **body: Unpack[MemoryList]) -> AsyncIterator[ListItemOut]:
        """Every key memory.list lists, page after page."""
        return self._paged("memory.list", dict(body))

    def iter_search(self, **body: Unpack[MemorySearch]) -> AsyncIterator[SearchHitOut]:
        """Every hit of a search, window after window (memory.search with paging=true)."""
        return self._paged("memory.search", {**body, "paging": True})

    def iter_trace_log(self, **body: Unpack[SearchTraceLog]) -> AsyncIterator[TraceLogRowOut]:
        """The search trace log, newest first, page after page."""
        return self._paged("memory.search_trace_log", dict(body))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
