"""Isolation as a property (hypothesis): whatever org, role, namespace grant, read_scope, op and revocation a token
is drawn with, and whatever org, namespace and end user it names, it never reads, writes or counts anything of
another org, of a namespace outside its grant, or (held to a user) of another user; asking is refused with the code
that says why.

The world: two orgs, each with namespaces `ops` and `hr`, each holding rows on one shared subject ("lighthouse
maintenance"), so a search that leaked would find the others'. Each row's key and value name their owner
("<org>/<namespace>"), so a leak shows in any answer's text: hits, trace-log rows, timelines, related rows, an
answer served from the LLM cache. Every search is logged (the trace log), and asks keep their answers (the cache).
Rows belong to end users u0 and u1 in turn, and say whose ("for user u0").
"""

import asyncio
import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client as McpClient

from mcp_server import dispatch, server, tools
from retrieval.errors import STATUS
from tenancy.models import ApiToken, Membership
from tests.conftest import Reply, Tenant

NAMESPACES = ("ops", "hr")
ROLES = ("viewer", "writer", "admin")
OPS = (
    "memory.search",
    "memory.search_trace",
    "memory.search_trace_log",
    "memory.list",
    "memory.get",
    "memory.bulk_get",
    "memory.timeline",
    "memory.related",
    "memory.recall",
    "memory.ask",
    "memory.brief",
    "context.pack",
    "extraction.list",
    "calibration.get",
    "eval.set_list",
    "eval.run_list",
    "eval.run_get",
    "memory.set",
    "memory.set_from_messages",
    "namespace.register",
    "eval.set_upload",
)
NEEDS = {
    "memory.set": "writer",
    "memory.set_from_messages": "writer",
    "namespace.register": "admin",
    "eval.set_upload": "admin",
}  # the rest read
# The ops that read rows: a read_scope holds each to the end user it names (Scope.reading).
HELD = {
    op
    for op in OPS
    if op.startswith("memory.") and op not in ("memory.search_trace_log", "memory.set", "memory.set_from_messages")
} | {"context.pack"}
USERS = ("u0", "u1")
# The ops an MCP tool runs (memory.search is not one: its tool is loom_search, search.query, drawn for it).
TOOL_OF = {tool.op: tool.name for tool in tools.TOOLS.values()} | {"memory.search": "loom_search"}


def over_mcp(op: str, body: dict, token: str) -> Reply:
    """The op as an agent calls it: its tool, through the SDK's client and server in process (each call then runs
    as the op's request: mcp_server/dispatch.py), read back as REST's status and body."""
    mcp = server.build(lambda ctx: dispatch.Caller(token=token))

    async def session():
        async with McpClient(mcp) as client:
            return await client.call_tool(TOOL_OF[op], body)

    result = asyncio.run(session())
    body = result.structured_content
    return Reply(STATUS[body["error"]["code"]] if result.is_error else 200, body)


def owner(org: str, namespace: str) -> str:
    return f"{org}/{namespace}"


def key(org: str, namespace: str, i: int) -> str:
    return f"row{i}.{owner(org, namespace)}"


def body_of(op: str, org: str, namespace: str) -> dict:
    """The op's body, naming the caller's own rows where it names a key."""
    return {
        "memory.search": {"query": "lighthouse maintenance schedule", "min_similarity": 0, "top_k": 50},
        "memory.search_trace": {"query": "lighthouse maintenance schedule"},
        "memory.search_trace_log": {"limit": 500},
        "memory.list": {"limit": 100},
        "memory.get": {"memory_key": key(org, namespace, 0)},
        "memory.bulk_get": {"memory_keys": [key(org, namespace, i) for i in range(3)]},
        "memory.timeline": {"memory_key_prefix": "row"},
        "memory.related": {"memory_key": key(org, namespace, 0)},
        "memory.recall": {"memory_key": key(org, namespace, 0)},
        "memory.ask": {"query": "when is the lighthouse maintained?", "llm_cache": True},
        "memory.brief": {"query": "when is the lighthouse maintained?", "allow_synthesis": False},
        "context.pack": {"query": "lighthouse maintenance schedule", "max_tokens": 4000, "min_similarity": 0},
        "calibration.get": {},
        "extraction.list": {},
        "memory.set": {"memory_key": f"probe-{uuid.uuid4().hex}", "value": "a lighthouse note, by the probe"},
        "memory.set_from_messages": {
            "session_id": "probe",
            "messages": [{"role": "user", "name": "Probe", "content": "I checked the lighthouse lamp today."}],
        },
        "namespace.register": {"description": "registered by the probe"},
        "eval.set_list": {},
        "eval.run_list": {},
        "eval.run_get": {},  # the namespace's latest run
        "eval.set_upload": {"set_name": "probe", "questions": [{"question": "lighthouse?", "should_abstain": True}]},
    }[op]


@pytest.fixture
def world(transactional_db, call, settings):  # (committed: an MCP call runs on a worker thread)
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    orgs = [Tenant("iso"), Tenant("iso")]
    for tenant in orgs:
        admin = tenant.token("admin")
        for namespace in NAMESPACES:
            assert call("namespace.register", {"namespace": namespace, "text_capture": True}, admin).status == 201
            items = [
                {
                    "memory_key": key(tenant.name, namespace, i),
                    "value": f"lighthouse maintenance schedule {i}, owned by {owner(tenant.name, namespace)}"
                    f", for user {USERS[i % 2]}",
                    "entities": ["lighthouse"],
                    "user_id": USERS[i % 2],
                }
                for i in range(3)
            ]
            assert call("memory.set", {"namespace": namespace, "items": items}, admin).status == 201
            body = {"namespace": namespace, "query": "when is the lighthouse maintained?", "llm_cache": True}
            assert call("memory.ask", body, admin).status == 200  # a cached answer that names its owner
            question = {"question": f"lighthouse schedule of {owner(tenant.name, namespace)}?"}
            question["gold_keys"] = [key(tenant.name, namespace, 0)]
            upload = {"namespace": namespace, "set_name": owner(tenant.name, namespace), "questions": [question]}
            assert call("eval.set_upload", upload, admin).status == 201  # a set and a run that name their owner
            run = {"namespace": namespace, "set_name": owner(tenant.name, namespace), "wait": True}
            assert call("eval.run", run, admin).status == 200
    return orgs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    caller=st.integers(0, 1),
    role=st.sampled_from(ROLES),
    grant=st.sampled_from([(), ("ops",), ("hr",), ("ops", "hr")]),
    op=st.sampled_from(OPS),
    named_org=st.sampled_from(["own", "other", "unnamed"]),
    namespace=st.sampled_from(NAMESPACES),
    all_mine=st.booleans(),
    revoked=st.sampled_from([False, False, False, True]),
    read_scope=st.sampled_from(["", "own_user"]),
    user=st.sampled_from([None, *USERS]),
    door=st.sampled_from(["rest", "mcp"]),
)
def test_a_token_never_reaches_outside_its_org_and_grant(
    backend, world, call, caller, role, grant, op, named_org, namespace, all_mine, revoked, read_scope, user, door
):
    mine, other = world[caller], world[1 - caller]
    token = mine.token(role, namespaces=grant, read_scope=read_scope)
    if revoked:
        ApiToken.objects.filter(prefix=token.split("_")[1]).update(revoked_at=timezone.now())
    body = {**body_of(op, mine.name, namespace), "namespace": namespace}
    if named_org != "unnamed":
        body["org"] = (mine if named_org == "own" else other).name
    if all_mine and op == "memory.search":
        body["namespace_scope"] = "all_mine"
    if user and op in HELD:
        body["user_id"] = user
    reply = over_mcp(op, body, token) if door == "mcp" and op in TOOL_OF else call(op, body, token)

    allowed = set(grant or NAMESPACES)
    if revoked:
        assert (reply.status, reply.error) == (401, "INVALID_TOKEN"), (op, reply.json)  # at once
    elif named_org == "other":
        assert (reply.status, reply.error) == (403, "ORG_MISMATCH"), (op, reply.json)
    elif namespace not in allowed:
        assert (reply.status, reply.error) == (403, "NAMESPACE_FORBIDDEN"), (op, reply.json)
    elif ROLES.index(role) < ROLES.index(NEEDS.get(op, "viewer")):
        assert (reply.status, reply.error) == (403, "ROLE_FORBIDDEN"), (op, reply.json)
    elif read_scope and op in HELD and not user:
        assert (reply.status, reply.error) == (422, "MISSING_FIELD"), (op, reply.json)
    elif op == "memory.get" and user == "u1":  # row 0 is u0's
        assert (reply.status, reply.error) == (404, "MEMORY_NOT_FOUND"), (op, reply.json)
    else:
        assert reply.status in (200, 201), (op, reply.json)
    said = json.dumps(reply.json)
    for tenant in world:
        for name in NAMESPACES:
            if tenant is not mine or name not in allowed:
                assert owner(tenant.name, name) not in said, (op, body)
    if user and op in HELD:  # named, a user's rows alone are read: with the read_scope, or as a filter without
        assert f"for user {USERS[1 - USERS.index(user)]}" not in said, (op, body)
    if reply.status == 200 and op == "memory.search":
        assert reply.json["candidates_total"] <= 4 * len(allowed)  # counts nothing it may not read (3 rows, a probe)
    if reply.status == 200 and op == "memory.search_trace_log" and role != "admin":
        assert {row["caller"] for row in reply.json["rows"]} <= {f"token:{token.split('_')[1]}"}  # its own rows
    if reply.status in (200, 201) and op == "memory.set":  # the write landed where it was addressed, and nowhere else
        for tenant in world:
            for name in NAMESPACES:
                found = call("memory.get", {"namespace": name, "memory_key": body["memory_key"]}, tenant.token("admin"))
                assert (found.status == 200) == (tenant is mine and name == namespace), (tenant.name, name)
        # Gone again, so the next example's search counts the world's rows alone (examples share the world).
        gone = call("memory.delete", {"namespace": namespace, "memory_key": body["memory_key"]}, mine.token("admin"))
        assert gone.status == 200


LAB_PAGES = (
    ("/recall", {"query": "lighthouse maintenance schedule", "top_k": "50"}),
    ("/recall/compare", {"query": "lighthouse maintenance schedule", "a_search_mode": "lexical"}),
    ("/recall/memories", {}),
    ("/recall/memories/{key}", {}),
    ("/recall/traces", {}),
    ("/recall/calibration", {}),
    ("/recall/audit", {}),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    caller=st.integers(0, 1),
    role=st.sampled_from(ROLES),
    page=st.sampled_from(LAB_PAGES),
    named_org=st.sampled_from(["own", "other", "unnamed"]),
    namespace=st.sampled_from(NAMESPACES),
    whose_key=st.sampled_from(["own", "other"]),
)
def test_a_dashboard_user_never_sees_outside_their_orgs(
    backend, world, caller, role, page, named_org, namespace, whose_key
):
    """The Recall Lab's pages, to a member of one org asking for anything (another org by name, its keys): they
    show that org's rows or nothing, never another's."""
    mine, other = world[caller], world[1 - caller]
    user = get_user_model().objects.create_user(f"lab-{uuid.uuid4().hex[:10]}", password="x")
    Membership.objects.create(user=user, org=mine.org, role=role)
    client = Client()
    client.force_login(user)
    path, query = page
    owned_by = mine if whose_key == "own" else other
    path = path.format(key=key(owned_by.name, namespace, 0))
    query = {**query, "namespace": namespace}
    if named_org != "unnamed":
        query["org"] = (mine if named_org == "own" else other).name
    answer = client.get(path, query)
    assert answer.status_code in (200, 403, 404), (path, query, answer.status_code)
    shown = answer.content.decode()  # a page may echo what was asked (a key naming its owner), never the rows
    for name in NAMESPACES:
        assert f"owned by {owner(other.name, name)}" not in shown, (path, query)
    if answer.status_code == 200 and whose_key == "own" and path.startswith("/recall/memories/"):
        assert f"owned by {owner(mine.name, namespace)}" in shown  # the user's own rows, shown
