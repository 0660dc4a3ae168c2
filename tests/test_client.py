"""The Python client (client/loom_recall) against the live server: sync and async, refusals as LoomError, retries
on 429 after Retry-After, paging helpers, the token from LOOM_TOKEN; and its typed ops current with the schema."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from loom_recall import AsyncClient, Client, LoomError

from tenancy import limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))
import codegen  # noqa: E402 (client/codegen.py, a script beside the package)

sys.path.remove(str(ROOT / "client"))

FACTS = {f"deploy.{n}": f"production deploys on day {n} need a second reviewer" for n in range(5)}


@pytest.fixture
def server(backend, transactional_db, live_server, alice, monkeypatch):
    """The live server's URL, with a writer token of alice's org in LOOM_TOKEN."""
    monkeypatch.setenv("LOOM_TOKEN", alice.token("writer"))
    return live_server.url


def test_the_typed_ops_are_current_with_the_schema(tmp_path):
    schema = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    written = codegen.generate(__import__("json").loads(schema.read_text()))
    formatted = subprocess.run(
        [Path(sys.executable).parent / "ruff", "format", "--stdin-filename", "_ops.py", "-"],
        input=written,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    committed = (ROOT / "client" / "loom_recall" / "_ops.py").read_text()
    assert formatted == committed, "client/loom_recall/_ops.py is stale: run `make client`"


def test_sync_client_round_trips_and_refuses_by_code(server):
    with Client(server) as loom:  # the token from LOOM_TOKEN
        written = loom.memory_set(memory_key="deploy.window", value="production deploys run on tuesdays after 10am")
        assert (written["memory_key"], written["outcome"]) == ("deploy.window", "created")
        batch = loom.memory_set_batch(items=[{"memory_key": key, "value": value} for key, value in FACTS.items()])
        assert batch["count"] == 5

        found = loom.memory_search(query="when do production deploys run?", top_k=3)
        assert found["abstain"] is False and found["hits"][0]["memory_key"] == "deploy.window"
        answered = loom.memory_ask(query="When do production deploys run?")
        assert "deploy.window" in answered["memory_keys"]

        with pytest.raises(LoomError) as refused:
            loom.memory_get(memory_key="no.such.key")
        assert (refused.value.status, refused.value.code, refused.value.field) == (
            404,
            "MEMORY_NOT_FOUND",
            "memory_key",
        )
        with pytest.raises(LoomError) as bad:
            loom.memory_search(query="deploys", top_k=0)
        assert (bad.value.code, bad.value.field) == ("INVALID_VALUE", "top_k")


def test_paging_helpers_follow_every_page(server):
    with Client(server, namespace="paged") as loom:
        loom.memory_set_batch(items=[{"memory_key": key, "value": value} for key, value in FACTS.items()])
        assert sorted(row["memory_key"] for row in loom.iter_memories(limit=2)) == sorted(FACTS)
        keys = [hit["memory_key"] for hit in loom.iter_search(query="deploys reviewer", top_k=2, min_similarity=0)]
        assert sorted(keys) == sorted(FACTS) and len(keys) == len(set(keys))


def test_async_client_does_the_same(server):
    async def session():
        async with AsyncClient(server, namespace="async") as loom:
            await loom.memory_set_batch(items=[{"memory_key": key, "value": value} for key, value in FACTS.items()])
            found = await loom.memory_search(query="deploys on day 3", top_k=1)
            listed = [row["memory_key"] async for row in loom.iter_memories(limit=2)]
            with pytest.raises(LoomError) as refused:
                await loom.memory_get(memory_key="no.such.key")
            return found, listed, refused.value

    found, listed, refused = asyncio.run(session())
    assert found["hits"][0]["memory_key"] == "deploy.3"
    assert sorted(listed) == sorted(FACTS) and refused.code == "MEMORY_NOT_FOUND"


def test_a_rate_limited_call_is_sent_again_after_retry_after(server, settings):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 60, 1  # one a second
    limits.forget()
    with Client(server) as loom:
        loom.calibration_get()
        started = time.monotonic()
        assert loom.calibration_get()["tier"]  # refused once (Retry-After: 1), then served
        assert time.monotonic() - started >= 0.5
    with Client(server, retries=0) as impatient, pytest.raises(LoomError) as refused:
        impatient.calibration_get()
    assert (refused.value.status, refused.value.code) == (429, "RATE_LIMITED")
    assert refused.value.details["retry_after"] > 0


def test_a_missing_token_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("LOOM_TOKEN", raising=False)
    with pytest.raises(ValueError, match="LOOM_TOKEN"):
        Client("http://127.0.0.1:9")


def test_the_readme_examples_print_what_they_show(server, monkeypatch, capsys):
    section = (ROOT / "README.md").read_text().split("## From Python")[1].split("\n## ")[0]
    codes = [block.split("```")[0] for block in section.split("```python\n")[1:]]
    printed = [block.split("```")[0] for block in section.split("prints\n\n```\n")[1:]]
    assert len(codes) == len(printed) == 2  # Client, then Agent
    monkeypatch.setenv("LOOM_URL", server)
    for code, shown in zip(codes, printed):
        exec(compile(code, "README.md", "exec"), {})
        assert capsys.readouterr().out == shown
