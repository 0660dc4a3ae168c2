"""The conflict resolver: a row written with a conflict verdict is queued, and a pass has the model (through the
openai SDK against the suite's model server) judge the pair: a revision supersedes the older row, a contradiction
marks both (search and memory.ask say so), compatible clears the verdict; each decision is on the record."""

import json

import pytest

from retrieval.ingest import extraction_pass
from tests.model_server import Answer

pytestmark = pytest.mark.cluster

DARK = {"memory_key": "theme-then", "value": "The user prefers a dark theme in the editor", "entities": ["editor"]}
LIGHT = {"memory_key": "theme-now", "value": "The user prefers a light theme in the editor", "entities": ["editor"]}


def judged(decision: str, reason: str = "The newer memory changes the preference.") -> Answer:
    return Answer(content=json.dumps({"decision": decision, "reason": reason}))


@pytest.fixture
def writer(alice, settings, openai_llm):
    settings.LOOM_CONFLICT_THRESHOLD, settings.LOOM_DUPLICATE_THRESHOLD = 0.5, 0.99
    return alice.token("writer")


def get(call, token, key: str, **fields) -> dict:
    return call("memory.get", {"memory_key": key, **fields}, token).json


def write_the_pair(call, writer) -> dict:
    call("memory.set", DARK, writer)
    written = call("memory.set", LIGHT, writer).json
    assert written["conflict_verdict"]["memory_key"] == "theme-then"
    [job] = call("extraction.list", {}, writer).json["jobs"]
    assert (job["task"], job["turn_keys"]) == ("conflicts", ["theme-now"])
    return written


def test_a_revision_supersedes_the_older_row_and_is_on_the_record(backend, alice, call, writer, model_server):
    written = write_the_pair(call, writer)
    model_server.script(judged("revision"))
    assert extraction_pass.run_due(org=alice.name) == 1
    assert call("memory.get", {"memory_key": "theme-then"}, writer).error == "MEMORY_NOT_FOUND"  # no longer live
    body = {"query": "editor theme", "include_superseded": True}
    former = {h["memory_key"]: h for h in call("memory.search", body, writer).json["hits"]}["theme-then"]
    assert (former["status"], former["superseded_by"]) == ("superseded", written["version"])
    newer = get(call, writer, "theme-now", history=True)
    assert newer["conflict_verdict"]["resolution"] == "revision"
    assert [(d["decision"], d["other_key"], d["reason"]) for d in newer["decisions"]] == [
        ("revision", "theme-then", "The newer memory changes the preference.")
    ]
    hits = [h["memory_key"] for h in call("memory.search", {"query": "editor theme"}, writer).json["hits"]]
    assert "theme-now" in hits and "theme-then" not in hits
    [sent] = model_server.chat_requests()
    prompt = sent.body["messages"][-1]["content"]
    assert DARK["value"] in prompt and LIGHT["value"] in prompt and "<memories>" in prompt
    entries = call("audit.list", {}, alice.token("admin")).json["entries"]
    resolved = [e for e in entries if e["action"] == "memory.conflict_resolved"]
    assert resolved and resolved[0]["detail"]["reason"] == "The newer memory changes the preference."
    assert resolved[0]["detail"]["prompt"] == "resolve-v1"


def test_a_contradiction_keeps_both_marked_and_search_and_ask_say_so(backend, alice, call, writer, model_server):
    write_the_pair(call, writer)
    model_server.script(judged("contradiction", "Both state a current theme."))
    assert extraction_pass.run_due(org=alice.name) == 1
    assert get(call, writer, "theme-then")["conflict_verdict"] == {
        "memory_key": "theme-now",
        "resolution": "contradiction",
        "reason": "Both state a current theme.",
    }
    hits = {h["memory_key"]: h for h in call("memory.search", {"query": "editor theme"}, writer).json["hits"]}
    assert (hits["theme-then"]["contradicts"], hits["theme-now"]["contradicts"]) == (["theme-now"], ["theme-then"])
    model_server.script(Answer(content="The user prefers dark [1] or light [2]; the two disagree."))
    reply = call("memory.ask", {"query": "Which editor theme does the user prefer?"}, writer)
    assert reply.status == 200, reply.json
    prompt = model_server.chat_requests()[-1].body["messages"][-1]["content"]
    assert "contradicted by theme-now" in prompt and "contradicted by theme-then" in prompt
    assert {h["memory_key"]: h["contradicts"] for h in reply.json["hits"]}["theme-now"] == ["theme-then"]


def test_compatible_clears_the_verdict(backend, alice, call, writer, model_server):
    write_the_pair(call, writer)
    model_server.script(judged("compatible", "One is for the editor, one elsewhere."))
    assert extraction_pass.run_due(org=alice.name) == 1
    newer = get(call, writer, "theme-now", history=True)
    assert newer["conflict_verdict"] is None and newer["decisions"][0]["decision"] == "compatible"
    assert get(call, writer, "theme-then")["status"] == "active"


def test_a_row_that_moved_on_is_not_judged(backend, alice, call, writer, model_server):
    write_the_pair(call, writer)
    moved = call("memory.set", {**LIGHT, "value": "Deploys are frozen on Fridays after noon"}, writer).json
    assert moved["conflict_verdict"] is None
    extraction_pass.run_due(org=alice.name)
    assert model_server.chat_requests() == []  # the version queued is gone: nothing to ask
    assert get(call, writer, "theme-then")["status"] == "active"


@pytest.mark.parametrize(
    "failure",
    [
        [Answer(content="not json"), Answer(content='{"decision": "maybe"}')],  # malformed, and again repaired
        [Answer(delay_s=3)],  # the model times out
        [Answer(402, code="budget_exceeded")],  # the gateway refuses the writer's call
    ],
    ids=["malformed", "timeout", "gateway_refused"],
)
def test_a_failing_model_leaves_both_rows_as_written_and_the_job_retried(
    backend, alice, call, writer, model_server, settings, failure
):
    settings.LOOM_LLM_RETRY_ATTEMPTS = 1
    settings.LOOM_LLM_REQUEST_TIMEOUT_S = 1
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = '{"X-Subject": "{subject}"}'
    written = write_the_pair(call, writer)
    model_server.script(*failure)
    assert extraction_pass.run_due(org=alice.name) == 1
    assert get(call, writer, "theme-then")["status"] == "active"
    newer = get(call, writer, "theme-now", history=True)
    assert (newer["conflict_verdict"], newer["decisions"]) == (written["conflict_verdict"], [])
    [job] = call("extraction.list", {}, writer).json["jobs"]
    assert (job["state"], job["attempts"]) == ("pending", 1) and job["error"]
    assert {seen.headers.get("x-subject") for seen in model_server.chat_requests()} <= {job["enqueued_by"]}


def test_off_on_the_fake_llm(backend, alice, call, settings):
    settings.LOOM_CONFLICT_THRESHOLD, settings.LOOM_DUPLICATE_THRESHOLD = 0.5, 0.99
    token = alice.token("writer")
    call("memory.set", DARK, token)
    assert call("memory.set", LIGHT, token).json["conflict_verdict"]
    assert call("extraction.list", {}, token).json["jobs"] == []  # an echo cannot judge


def test_off_when_switched_off(backend, call, writer, settings):
    settings.LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED = False
    call("memory.set", DARK, writer)
    assert call("memory.set", LIGHT, writer).json["conflict_verdict"]
    assert call("extraction.list", {}, writer).json["jobs"] == []
