"""The MCP door over streamable HTTP (POST /mcp on the live server), driven by the official SDK's own client: the
tools it lists, each called beside its REST op with the same body and token (the same hits, verdicts and errors),
the door's refusals, tenancy and roles, and the trace log naming the tool."""

import asyncio
import json
import urllib.error
import urllib.request

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.test import Client as DjangoClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_server import dispatch, server
from mcp_server.tools import TOOLS
from tenancy.models import Membership
from tests.conftest import Reply

FACTS = {
    "pref.editor": "Dana prefers vim keybindings in every editor she uses.",
    "customer.acme.contact": "Dana Reyes is the Acme contact for the renewal; she prefers email.",
    "deploy.window": "Production deploys happen on Tuesdays after the 10am standup.",
}


def run_mcp(url: str, token: str | None, calls, namespace: str | None = None):
    """Connect the SDK's client to `url` with `token`, and run `calls(client)` (a coroutine function)."""

    async def session():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if namespace:
            headers["X-Loom-Namespace"] = namespace
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await calls(client)

    return asyncio.run(session())


def tool(url: str, token: str, name: str, arguments: dict, namespace: str | None = None):
    async def calls(client):
        return await client.call_tool(name, arguments)

    return run_mcp(url, token, calls, namespace)


def rest(base: str, op: str, body: dict, token: str) -> Reply:
    request = urllib.request.Request(f"{base}/v1/{op}", data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return Reply(answer.status, json.loads(answer.read()))
    except urllib.error.HTTPError as error:
        return Reply(error.code, json.loads(error.read()))


@pytest.fixture
def door(backend, transactional_db, live_server, alice):
    """The live server's /mcp and base URL, with alice's namespace holding FACTS."""
    token = alice.token("writer")
    items = [{"memory_key": key, "value": value} for key, value in FACTS.items()]
    assert rest(live_server.url, "memory.set", {"items": items}, token).status == 201
    return f"{live_server.url}/mcp", live_server.url, token


def without_timing(body: dict) -> dict:
    """An answer as two calls of one request agree on it: not when it ran, how long it took or how it read (the
    first search of a namespace may read ClickHouse while its mirror loads), nor its page handle."""
    drop = {"latency_ms", "stage_ms", "trace_id", "next", "retrieval_work"}
    if isinstance(body, dict):
        return {k: without_timing(v) for k, v in body.items() if k not in drop}
    if isinstance(body, list):
        return [without_timing(v) for v in body]
    return body


def test_tools_list_names_each_tool_with_its_intent_and_the_schema_rest_publishes(door):
    url, base, token = door
    listed = run_mcp(url, token, lambda client: client.list_tools()).tools
    names = [t.name for t in listed]
    assert names[0] == "loom_search"
    assert set(names) == {
        "loom_search",
        "context_pack",
        "memory_brief",
        "memory_ask",
        "memory_get",
        "memory_recall",
        "memory_set",
        "memory_set_from_messages",
        "memory_delete",
        "memory_outcome",
    }
    assert "memory_search" not in names  # the spec: memory.search is not an MCP tool of its own
    by_name = {t.name: t for t in listed}
    search = by_name["loom_search"]
    assert search.input_schema["type"] == "object"
    assert "query" in search.input_schema["properties"] and "paging" not in search.input_schema["properties"]
    assert "abstain" in search.description
    with urllib.request.urlopen(f"{base}/v1/schema?format=json", timeout=30) as answer:
        published = json.loads(answer.read())["components"]["schemas"]
    assert by_name["memory_get"].input_schema["properties"].keys() == published["MemoryGet"]["properties"].keys()
    assert by_name["memory_set"].input_schema["required"] == published["MemorySetOne"]["required"]
    assert by_name["memory_set"].annotations.read_only_hint is False
    assert by_name["memory_delete"].annotations.destructive_hint is True
    assert search.annotations.read_only_hint is True


def test_loom_search_answers_as_search_query_does_over_rest(door):
    url, base, token = door
    body = {"query": "Who is the Acme contact for the renewal?", "top_k": 2, "search_mode": "hybrid"}
    over_mcp = tool(url, token, "loom_search", body)
    over_rest = rest(base, "search.query", body, token)
    assert over_rest.status == 200 and not over_mcp.is_error
    found = over_mcp.structured_content
    assert found["hits"][0]["memory_key"] == "customer.acme.contact"
    assert found["hits"][0]["plane"] == "memory"
    assert without_timing(found) == without_timing(over_rest.json)
    assert json.loads(over_mcp.content[0].text)["hits"][0]["memory_key"] == "customer.acme.contact"
    # always paged: the next window follows from the handle, as REST's does (three facts, two a window)
    more = tool(url, token, "loom_search", {"page": found["next"]}).structured_content
    rest_more = rest(base, "search.query", {"page": over_rest.json["next"]}, token).json
    assert more["hits"] and [h["memory_key"] for h in more["hits"]] == [h["memory_key"] for h in rest_more["hits"]]


def test_loom_search_abstains_where_rest_does(door):
    url, base, token = door
    body = {"query": "What is the boiling point of liquid nitrogen?"}
    found = tool(url, token, "loom_search", body).structured_content
    assert found["abstain"] is True and found["abstain_code"]
    assert found["abstain_code"] == rest(base, "search.query", body, token).json["abstain_code"]
    assert found["pending_extraction"] == 0 and found["retrieval_risk"] == "abstain"


READS = [
    ("memory_get", {"memory_key": "customer.acme.contact", "history": True}),
    ("memory_ask", {"query": "Who is the Acme contact?", "allow_synthesis": False}),
    ("memory_ask", {"query": "Who is the Acme contact?", "llm_cache": False}),  # (the fake LLM: one answer)
    ("context_pack", {"query": "Who is the Acme contact?", "max_tokens": 64}),
    ("memory_brief", {"query": "When do production deploys happen?", "allow_synthesis": False}),
    ("memory_recall", {"session_id": "nobody"}),
    ("loom_search", {"query": "What is the boiling point of liquid nitrogen?"}),
]


@pytest.mark.parametrize(("name", "arguments"), READS, ids=[f"{name}-{i}" for i, (name, _) in enumerate(READS)])
def test_a_read_tool_answers_what_its_op_answers(door, name, arguments):
    url, base, token = door
    over_mcp = tool(url, token, name, arguments)
    over_rest = rest(base, TOOLS[name].op, arguments, token)
    assert over_mcp.is_error is (over_rest.status >= 400)
    assert without_timing(over_mcp.structured_content) == without_timing(over_rest.json)


def test_every_tool_answers_as_its_op(door):
    url, base, token = door

    async def calls(client):
        got = {}
        got["set"] = await client.call_tool("memory_set", {"memory_key": "pref.tea", "value": "Dana drinks green tea."})
        got["get"] = await client.call_tool("memory_get", {"memory_key": "pref.tea"})
        got["ask"] = await client.call_tool("memory_ask", {"query": "What does Dana drink?"})
        messages = [{"role": "user", "name": "Dana", "content": "I moved to Lisbon last month with my two cats."}]
        got["conversation"] = await client.call_tool(
            "memory_set_from_messages", {"session_id": "s-1", "messages": messages}
        )
        got["recall"] = await client.call_tool("memory_recall", {"session_id": "s-1"})
        got["outcome"] = await client.call_tool("memory_outcome", {"memory_keys": ["pref.tea"], "outcome": "positive"})
        got["delete"] = await client.call_tool("memory_delete", {"memory_key": "pref.tea"})
        got["gone"] = await client.call_tool("memory_get", {"memory_key": "pref.tea"})
        return got

    got = run_mcp(url, token, calls)
    assert got["set"].structured_content["outcome"] == "created"
    assert got["get"].structured_content["value"] == "Dana drinks green tea."
    assert "pref.tea" in got["ask"].structured_content["memory_keys"]
    assert got["conversation"].structured_content["turns"][0]["outcome"] == "created"
    assert [t["value"] for t in got["recall"].structured_content["turns"]] == [
        "Dana: I moved to Lisbon last month with my two cats."
    ]
    assert got["outcome"].structured_content == {"recorded": 1, "outcome": "positive"}
    assert got["delete"].structured_content["deleted"] >= 1
    assert got["gone"].is_error and got["gone"].structured_content["error"]["code"] == "MEMORY_NOT_FOUND"
    # the REST op, asked the same after the tools ran, agrees
    assert rest(base, "memory.get", {"memory_key": "pref.tea"}, token).error == "MEMORY_NOT_FOUND"
    assert rest(base, "memory.get", {"memory_key": "pref.editor"}, token).json["value"] == FACTS["pref.editor"]


def test_bad_arguments_are_a_tool_error_naming_the_field_as_rest_does(door):
    url, base, token = door
    for arguments in ({"query": "editor", "top_k": 0}, {"query": "editor", "surprise": 1}, {}):
        refused = tool(url, token, "loom_search", arguments)
        envelope = rest(base, "search.query", arguments, token).json
        assert refused.is_error and refused.structured_content == envelope
        error = envelope["error"]
        assert refused.content[0].text.startswith(f"{error['code']}: ")
        assert f"(field: {error['field']})" in refused.content[0].text
        assert "Traceback" not in refused.content[0].text


def test_an_unknown_tool_is_a_protocol_error(door):
    url, base, token = door

    async def calls(client):
        with pytest.raises(MCPError, match="no tool 'memory_search': tools/list names them"):
            await client.call_tool("memory_search", {"query": "editor"})

    run_mcp(url, token, calls)


def test_the_door_refuses_a_missing_or_wrong_token_with_the_envelope(door):
    url, base, token = door
    for header, code in ((None, "UNAUTHENTICATED"), ("Bearer nope", "INVALID_TOKEN")):
        request = urllib.request.Request(url, data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        if header:
            request.add_header("Authorization", header)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"] == 'Bearer realm="loom"'
        assert json.loads(refused.value.read())["error"]["code"] == code


def test_the_door_refuses_a_body_over_the_limit_with_the_envelope(door, settings):
    url, base, token = door
    settings.LOOM_REQUEST_MAX_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "memory_set", "arguments": {"memory_key": "big", "value": "x" * 2000}}
    request = urllib.request.Request(url, data=json.dumps(call).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 413 and json.loads(refused.value.read())["error"]["code"] == "BODY_TOO_LARGE"
    assert rest(base, "memory.get", {"memory_key": "big"}, token).error == "MEMORY_NOT_FOUND"


def test_another_orgs_token_sees_nothing_and_a_viewer_cannot_write(door, bob, alice):
    url, base, token = door
    found = tool(url, bob.token("admin"), "loom_search", {"query": "Who is the Acme contact for the renewal?"})
    assert found.structured_content["hits"] == []
    got = tool(url, bob.token("admin"), "memory_get", {"memory_key": "customer.acme.contact"})
    assert got.structured_content["error"]["code"] == "MEMORY_NOT_FOUND"
    refused = tool(url, alice.token("viewer"), "memory_set", {"memory_key": "pref.x", "value": "not stored"})
    assert refused.is_error and refused.structured_content["error"]["code"] == "ROLE_FORBIDDEN"
    assert rest(base, "memory.get", {"memory_key": "pref.x"}, token).error == "MEMORY_NOT_FOUND"


def test_a_tool_call_is_audited_as_coming_through_its_tool(door, alice):
    url, base, token = door
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"  # a Stripe live key: stored high, readable by key, audited
    assert rest(base, "memory.set", {"memory_key": "ops.aws", "value": f"the box has {secret}"}, token).status == 201
    assert tool(url, token, "memory_get", {"memory_key": "ops.aws"}).structured_content["sensitivity"] == "high"
    entries = rest(base, "audit.list", {"limit": 10}, alice.token("admin")).json["entries"]
    [read] = [entry for entry in entries if entry["action"] == "memory.read_sensitive"]
    assert read["origin"] == "mcp:memory_get@127.0.0.1" and read["detail"]["op"] == "memory.get"


def test_an_answer_without_the_envelope_is_a_tool_error_not_a_traceback(door):
    """A Host the site refuses gets Django's own 400 page, not JSON: the tool says so in the envelope's terms."""
    url, base, token = door
    mcp = server.build(lambda ctx: dispatch.Caller(token=token, host="evil.example"))

    async def session():
        async with Client(mcp) as client:
            return await client.call_tool("memory_get", {"memory_key": "pref.editor"})

    refused = asyncio.run(session())
    assert refused.is_error and refused.structured_content["error"]["code"] == "INTERNAL_ERROR"
    assert "answered 400 without the envelope" in refused.content[0].text


def test_the_connection_may_name_the_namespace(door, alice):
    url, base, token = door
    written = tool(url, token, "memory_set", {"memory_key": "pref.lang", "value": "Dana writes Go."}, "team-b")
    assert written.structured_content["outcome"] == "created"
    assert rest(base, "memory.get", {"memory_key": "pref.lang", "namespace": "team-b"}, token).status == 200
    assert rest(base, "memory.get", {"memory_key": "pref.lang"}, token).error == "MEMORY_NOT_FOUND"


def test_the_trace_log_names_the_tool(door, settings, alice):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    url, base, token = door
    tool(url, token, "loom_search", {"query": "When do production deploys happen?"})
    rest(base, "search.query", {"query": "When do production deploys happen?"}, token)
    rows = rest(base, "memory.search_trace_log", {"limit": 10}, token).json["rows"]
    assert sorted(row["op"] for row in rows) == ["loom_search", "search.query"]
    # ...and so does the Lab's Traces page, filtered to the tool
    user = get_user_model().objects.create_user("lab-mcp", password="x")
    Membership.objects.create(user=user, org=alice.org, role="admin")  # (a viewer sees its own searches alone)
    lab = DjangoClient()
    lab.force_login(user)
    page = lab.get("/recall/traces", {"namespace": "default", "op": "loom_search"}).content.decode()
    assert "<td>loom_search</td>" in page and "<td>search.query</td>" not in page
