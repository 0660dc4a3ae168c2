"""The spec's SDK shape: `Agent(org, namespace, agent)`, its ops by family (`agent.memory.search(...)`,
`agent.search.query(...)`, `agent.context.pack(...)`), each answer an object whose attributes are the envelope's
fields (`result.abstain`, `result.hits[0].memory_key`). Async, over `AsyncClient`: its retries and its refusals
(`LoomError`).

    from loom import Agent

    async with Agent(org="acme", namespace="support", agent="triage-bot") as agent:
        found = await agent.memory.search("when can we deploy to production?")
        if found.abstain:
            ...  # memory does not know: branch on found.abstain_code
"""

from typing import Any

from loom_recall._ops import OPS
from loom_recall.client import AsyncClient

# The fields a call may pass by position, in this order; every other field by name.
POSITIONAL = {
    "memory.search": ("query",),
    "search.query": ("query",),
    "memory.ask": ("query",),
    "memory.brief": ("query",),
    "context.pack": ("query",),
    "memory.set": ("memory_key", "value"),
    "memory.get": ("memory_key",),
    "memory.delete": ("memory_key",),
    "memory.recall": ("memory_key",),
    "memory.related": ("memory_key",),
}
AUTHORED = frozenset({"memory.set", "memory.set_from_messages"})  # writes that record their writer (`agent`)


def body_of(op: str, args: tuple, fields: dict) -> dict:
    """An op's body from a call's positional and named arguments."""
    names = POSITIONAL.get(op, ())
    if len(args) > len(names):
        raise TypeError(f"{op} takes at most {len(names)} positional arguments ({', '.join(names) or 'none'})")
    return {**dict(zip(names, args)), **fields}


class Result(dict):
    """An answer: a dict (nothing the envelope carries is hidden, and it prints as JSON) whose fields are also
    attributes, nested ones too (`result.hits[0].memory_key`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _result(value: Any) -> Any:
    if isinstance(value, dict):
        return Result({key: _result(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_result(item) for item in value]
    return value


class _Family:
    """The ops of one family: `memory.search` is `agent.memory.search`."""

    def __init__(self, agent: "Agent", family: str):
        self._agent, self._family = agent, family

    def __getattr__(self, name: str):
        op = f"{self._family}.{name}"
        if op not in OPS:
            raise AttributeError(f"no op {op}")

        async def call(*args, **fields) -> Result:
            return await self._agent.call(op, *args, **fields)

        call.__name__ = name
        return call


class Agent:
    """An agent's view of one org and namespace. `org` (optional) must be the token's; `agent` names the writer of
    what it stores (reads read every writer's, as the spec has them). `url` and `token` default to LOOM_URL and
    LOOM_TOKEN; other keywords go to `AsyncClient` (timeout, retries)."""

    def __init__(
        self,
        org: str | None = None,
        namespace: str = "default",
        agent: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        **options,
    ):
        self.org, self.namespace, self.agent = org, namespace, agent
        self._client = AsyncClient(url, token, namespace=namespace, **options)
        self.memory, self.search, self.context = (_Family(self, family) for family in ("memory", "search", "context"))

    async def call(self, op: str, *args, **fields) -> Result:
        """Any op by name (`"memory.search"`), its first fields by position as the families take them."""
        body = body_of(op, args, fields)
        if self.org:
            body.setdefault("org", self.org)
        if self.agent and op in AUTHORED:
            body.setdefault("agent", self.agent)
        return _result(await self._client._op(op, body))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
