"""The entity extractor: where a real model is configured, a row written without entities is queued for it, and a
pass writes the entities and relations the model names as the row's next version (through the openai SDK against
the suite's model server). At write time the row already has the names read from its value
(tests/test_entity_extraction.py)."""

import json

import pytest

from retrieval.ingest import extraction_pass
from retrieval.store import extraction_queue
from tests.model_server import Answer

pytestmark = pytest.mark.cluster

MOVED = {"memory_key": "dana-move", "value": "my sister dana moved to lisbon in may"}  # nothing capitalised


def named(*rows: tuple[int, list[str], list[list[str]]]) -> Answer:
    memories = [
        {"i": i, "entities": entities, "triples": [dict(zip(("subject", "relation", "object"), t)) for t in triples]}
        for i, entities, triples in rows
    ]
    return Answer(content=json.dumps({"memories": memories}))


@pytest.fixture
def writer(alice):
    return alice.token("writer")


def jobs(call, writer, **fields) -> list[dict]:
    return call("extraction.list", fields, writer).json["jobs"]


def test_the_model_names_a_rows_entities_and_relations_and_the_legs_serve_them(
    backend, alice, call, writer, openai_llm, model_server
):
    assert call("memory.set", MOVED, writer).json["version"]
    assert call("memory.get", {"memory_key": "dana-move"}, writer).json["entities"] == []  # no name written as one
    [job] = jobs(call, writer)
    assert (job["task"], job["state"], job["turn_keys"]) == ("entities", "pending", ["dana-move"])
    assert call("memory.search", {"query": "dana moved"}, writer).json["pending_extraction"] == 0  # served already

    model_server.script(named((0, ["Dana", "Lisbon"], [["Dana", "moved to", "Lisbon"]])))
    assert extraction_pass.run_due(org=alice.name) == 1
    row = call("memory.get", {"memory_key": "dana-move"}, writer).json
    assert (row["value"], row["entities"], row["triples"], row["version"] > 0) == (
        MOVED["value"],
        ["Dana", "Lisbon"],
        [{"subject": "Dana", "relation": "moved to", "object": "Lisbon"}],
        True,
    )
    [job] = jobs(call, writer)
    assert (job["state"], job["facts"]) == ("done", 1)
    [sent] = model_server.chat_requests()
    prompt = sent.body["messages"][-1]["content"]
    assert "<memories>" in prompt and MOVED["value"] in prompt
    # The legs serve the model's names: a row that mentions Lisbon is related to it, an entity filter finds it.
    call("memory.set", {"memory_key": "office", "value": "The new office is in Lisbon", "entities": ["Lisbon"]}, writer)
    related = call("memory.related", {"memory_key": "office"}, writer).json
    assert "dana-move" in [r["memory_key"] for r in related["results"]]
    found = call("memory.search", {"query": "who moved", "entity_filter": ["Dana"]}, writer).json["hits"]
    assert found[0]["memory_key"] == "dana-move"


def test_written_again_the_same_value_keeps_the_models_names_and_queues_nothing(
    backend, alice, call, writer, openai_llm, model_server
):
    call("memory.set", MOVED, writer)
    model_server.script(named((0, ["Dana", "Lisbon"], [])))
    extraction_pass.run_due(org=alice.name)
    again = call("memory.set", MOVED, writer).json
    assert again["outcome"] == "unchanged"
    assert [job["state"] for job in jobs(call, writer)] == ["done"]


def test_a_row_that_moved_on_meanwhile_is_not_undone(backend, alice, call, writer, openai_llm, model_server):
    call("memory.set", MOVED, writer)
    newer = {"memory_key": "dana-move", "value": "dana moved to porto after all", "entities": ["Dana", "Porto"]}
    call("memory.set", newer, writer)
    model_server.script(named((0, ["Dana", "Lisbon"], [])))
    assert extraction_pass.run_due(org=alice.name) == 1
    row = call("memory.get", {"memory_key": "dana-move"}, writer).json
    assert (row["value"], row["entities"]) == (newer["value"], ["Dana", "Porto"])
    assert model_server.chat_requests() == []  # the job's row is gone: nothing to ask about


@pytest.mark.parametrize(
    "failure",
    [
        [Answer(content="not json"), Answer(content='{"memories": 3}')],  # malformed, and once more repaired
        [Answer(delay_s=3)],  # the model times out
        [Answer(402, code="budget_exceeded")],  # the gateway refuses the writer's call
    ],
    ids=["malformed", "timeout", "gateway_refused"],
)
def test_a_failing_model_leaves_the_row_as_written_and_the_job_retried(
    backend, alice, call, writer, openai_llm, model_server, settings, failure
):
    settings.LOOM_LLM_RETRY_ATTEMPTS = 1
    settings.LOOM_LLM_REQUEST_TIMEOUT_S = 1
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = '{"X-Subject": "{subject}"}'
    written = call("memory.set", MOVED, writer).json
    model_server.script(*failure)
    assert extraction_pass.run_due(org=alice.name) == 1
    row = call("memory.get", {"memory_key": "dana-move"}, writer).json
    assert (row["version"], row["entities"]) == (written["version"], [])  # nothing half-written
    [job] = jobs(call, writer)
    assert (job["state"], job["attempts"]) == ("pending", 1) and job["error"]
    assert extraction_pass.run_due(org=alice.name) == 0  # backing off
    subjects = {seen.headers.get("x-subject") for seen in model_server.chat_requests()}
    assert subjects <= {job["enqueued_by"]}  # the writer's call, never the process's


def test_a_secret_is_never_queued_nor_sent(backend, alice, call, writer, openai_llm, model_server):
    secret = {"memory_key": "creds", "value": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    assert call("memory.set", secret, writer).json["sensitivity"] == "high"
    assert jobs(call, writer) == []
    assert extraction_pass.run_due(org=alice.name) == 0
    assert model_server.chat_requests() == []


def test_rows_written_with_entities_or_on_the_fake_llm_are_not_queued(backend, alice, call, writer):
    call("memory.set", {**MOVED, "entities": ["Dana"]}, writer)
    call("memory.set", {"memory_key": "other", "value": "Priya is the platform lead"}, writer)  # the fake LLM
    assert jobs(call, writer) == []
    assert call("memory.get", {"memory_key": "other"}, writer).json["entities"] == ["Priya"]


def test_one_job_per_author_and_session_of_at_most_a_calls_rows(backend, alice, call, writer, openai_llm, monkeypatch):
    from retrieval.ingest import write

    monkeypatch.setattr(write, "JOB_ROWS", 2)
    items = [{"memory_key": f"k{i}", "value": f"note {i} about the rollout", "session_id": "s1"} for i in range(3)]
    items.append({"memory_key": "k9", "value": "a note of another session", "session_id": "s2"})
    assert call("memory.set", {"items": items}, writer).status in (200, 201)
    named = [job for job in jobs(call, writer) if job["task"] == extraction_queue.ENTITIES]
    listed = sorted((job["session_id"], job["turn_keys"]) for job in named)
    assert listed == [("s1", ["k0", "k1"]), ("s1", ["k2"]), ("s2", ["k9"])]
