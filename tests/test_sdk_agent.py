"""The spec's SDK shape (`from loom import Agent`: `await agent.memory.search(...)`, the answer's fields as
attributes) and the `loom` command line, against the live server."""

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from loom import Agent, LoomError

LOOM = Path(__import__("sys").executable).parent / "loom"


@pytest.fixture
def server(backend, transactional_db, live_server, alice, monkeypatch):
    """The live server's URL in LOOM_URL, a writer token of alice's org in LOOM_TOKEN."""
    monkeypatch.setenv("LOOM_URL", live_server.url)
    monkeypatch.setenv("LOOM_TOKEN", alice.token("writer"))
    return live_server.url


def test_an_agent_writes_and_searches_as_the_spec_shows(server, alice):
    async def session():
        async with Agent(org=alice.name, namespace="support", agent="triage-bot") as agent:
            written = await agent.memory.set("deploy.window", "Production deploys run Tuesdays at 10:00 UTC")
            found = await agent.memory.search("when can we deploy to production?", top_k=3)
            unknown = await agent.search.query("what is the capital of Peru?")
            packed = await agent.context.pack("when can we deploy to production?", max_tokens=100)
            got = await agent.memory.get("deploy.window")
            return written, found, unknown, packed, got

    written, found, unknown, packed, got = asyncio.run(session())
    assert written.outcome == "created" and written.agent == "triage-bot"
    assert found.abstain is False and found.hits[0].memory_key == "deploy.window"
    assert found.namespaces_searched == ["support"]
    assert unknown.abstain is True and unknown.abstain_code and unknown.retrieval_risk == "abstain"
    assert packed.memory_keys == ["deploy.window"] and packed.tokens <= 100
    assert got.agent == "triage-bot" and json.loads(json.dumps(got))["memory_key"] == "deploy.window"


def test_a_refusal_raises_with_its_code_and_field_and_an_unknown_op_is_no_attribute(server, bob):
    async def session():
        async with Agent(org=bob.name) as agent:  # another org than the token's
            with pytest.raises(LoomError) as refused:
                await agent.memory.search("anything")
            assert refused.value.code == "ORG_MISMATCH"
        async with Agent() as agent:
            with pytest.raises(LoomError) as refused:
                await agent.memory.search("anything", top_k=0)
            assert (refused.value.code, refused.value.field) == ("INVALID_VALUE", "top_k")
            assert not hasattr(agent.memory, "searhc")  # a misspelt op fails at once, naming no op
            with pytest.raises(TypeError, match="memory.get takes at most 1 positional"):
                await agent.memory.get("a", "b")

    asyncio.run(session())


def loom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOOM), *args], capture_output=True, text=True, timeout=60, env=os.environ.copy())


def test_the_command_line_sets_and_searches(server, alice):
    done = loom("memory-set", "deploy.window", "Production deploys run Tuesdays at 10:00 UTC", "--tags", '["deploy"]')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "created"
    done = loom("memory-search", "when do deploys run?", "--top-k", "3")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hits"][0]["memory_key"] == "deploy.window"
    done = loom("memory-get", "deploy.window", "--namespace", "elsewhere")
    assert done.returncode == 1 and done.stderr.startswith("MEMORY_NOT_FOUND: ") and done.stdout == ""
    # an org-wide op too (it names no namespace)
    done = loom("org-get-model-calls", "--token", alice.token("admin"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["enabled"] is True
    done = loom("memory-search", "a", "b")
    assert done.returncode == 2 and "memory-search takes query positional arguments" in done.stderr
