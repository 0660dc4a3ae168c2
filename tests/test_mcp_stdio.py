"""The MCP door over stdio, as a desktop client starts it: `manage.py loom_mcp --token …` as a process of its own
(its own var/ on the embedded engine, or the suite's ClickHouse server), driven by the official SDK's stdio client."""

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def served(backend, request, tmp_path):
    """The environment of a fresh install (`make run`'s setup: migrate, then the demo org and its token), and the
    token, on the test's backend."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "DJANGO_"))}
    env |= {"LOOM_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "loom_site.settings"}
    if backend == "server":
        env["LOOM_CLICKHOUSE_URL"] = request.getfixturevalue("clickhouse_server").url
    for command in (["migrate", "--noinput"], ["loom_bootstrap"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True)
    token = json.loads((tmp_path / "var" / "demo-credentials.json").read_text())["token"]
    return env, token


def readme_lines() -> dict[str, str]:
    """The README's three lines that connect an MCP client: URL, Header and Command, the token shown as
    `loom_3f9c…`."""
    block = (ROOT / "README.md").read_text().split("<!-- mcp -->\n```\n")[1].split("```")[0]
    return dict(re.match(r"(\w+):\s+(.*)", line).groups() for line in block.splitlines())


def over_stdio(env: dict, token: str, extra: list[str], calls):
    """Run the README's command (with this token) as a desktop client would, and `calls(client)` over its stdio."""
    command, *args = shlex.split(readme_lines()["Command"].replace("loom_3f9c…", token))
    parameters = StdioServerParameters(command=str(ROOT / command), args=[*args, *extra], env=env, cwd=ROOT)

    async def session():
        async with Client(parameters) as client:
            return await calls(client)

    return asyncio.run(session())


def test_a_desktop_client_writes_searches_and_is_refused_by_field(served):
    env, token = served
    namespace = f"stdio-{uuid.uuid4().hex[:8]}"

    async def calls(client):
        listed = [t.name for t in (await client.list_tools()).tools]
        written = await client.call_tool(
            "memory_set", {"memory_key": "pref.editor", "value": "Dana prefers vim keybindings in every editor."}
        )
        found = await client.call_tool("loom_search", {"query": "Which editor keybindings does Dana prefer?"})
        unknown = await client.call_tool("loom_search", {"query": "What is the capital of Mongolia?"})
        refused = await client.call_tool("loom_search", {"query": "editor", "top_k": 0})
        return listed, written, found, unknown, refused

    deployed = {**env, "LOOM_ALLOWED_HOSTS": "memory.example.test"}  # a deployment that allows only its own name
    listed, written, found, unknown, refused = over_stdio(deployed, token, ["--namespace", namespace], calls)
    assert listed[0] == "loom_search" and "memory_set" in listed
    assert written.structured_content["outcome"] == "created"
    assert found.structured_content["hits"][0]["memory_key"] == "pref.editor"
    assert found.structured_content["namespaces_searched"] == [namespace]
    assert unknown.structured_content["abstain"] is True
    assert refused.is_error and refused.structured_content["error"]["field"] == "top_k"
    assert refused.content[0].text.startswith("INVALID_VALUE: ")


def test_a_wrong_token_stops_the_command_with_a_clear_message(served):
    env, _ = served
    done = subprocess.run(
        [sys.executable, "manage.py", "loom_mcp", "--token", "nope"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "the token is invalid or has been revoked" in done.stderr and "Traceback" not in done.stderr
