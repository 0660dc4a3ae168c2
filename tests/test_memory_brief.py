"""memory.brief: orientation on a task: memory's answer (through the openai SDK against the suite's model server),
its grounding, what memory does not know, and what to read next; the evidence alone when no model may be called."""

import pytest

from retrieval.ingest import extraction_pass
from tests.model_server import Answer
from tests.test_conflict_resolver import judged, write_the_pair

pytestmark = pytest.mark.cluster

DEPLOY = {"memory_key": "deploy-policy", "value": "Production deploys are frozen on Fridays after noon"}
OFFSITE = {"memory_key": "offsite", "value": "The company offsite is in Porto this year"}


def brief(agent, query: str, **fields):
    return agent.call("memory.brief", {"namespace": agent.namespace, "query": query, **fields}, agent.token)


def test_a_brief_answers_grounds_and_says_what_to_read_next(backend, openai_llm, model_server, ranker):
    ranker.set(DEPLOY, OFFSITE)
    model_server.script(Answer(content="No: production deploys are frozen on Fridays after noon [1]."))
    reply = brief(ranker, "Can we deploy to production on Fridays?")
    assert reply.status == 200, reply.json
    body = reply.json
    assert body["source"] == "synthesized" and body["answer"].endswith("[deploy-policy].")
    top = body["grounding"][0]
    assert (top["memory_key"], top["cited"], top["excerpt"]) == ("deploy-policy", True, DEPLOY["value"])
    assert {k: v for k, v in body["read_next"][-1].items() if k != "why"} == {
        "op": "memory.related",
        "arguments": {"namespace": "default", "memory_key": "deploy-policy"},
    }
    assert body["unknowns"] == [] and body["abstain"] is False


def test_evidence_only_makes_no_model_call(backend, openai_llm, model_server, ranker):
    ranker.set(DEPLOY)
    body = brief(ranker, "Can we deploy on Fridays?", allow_synthesis=False).json
    assert (body["answer"], body["source"]) == (None, "retrieval_only")
    assert body["grounding"][0]["memory_key"] == "deploy-policy"
    assert model_server.chat_requests() == []


def test_llm_free_reads_get_the_evidence_where_ask_is_refused(backend, openai_llm, model_server, ranker, settings):
    ranker.set(DEPLOY)
    settings.LOOM_READS_LLM_FREE = True
    assert ranker.call("memory.ask", {"query": "Fridays?"}, ranker.token).error == "READS_LLM_FREE"
    body = brief(ranker, "Can we deploy on Fridays?").json
    assert (body["answer"], body["source"]) == (None, "retrieval_only") and body["grounding"]
    assert model_server.chat_requests() == []


def test_what_memory_does_not_know_is_named(backend, openai_llm, model_server, agent, call):
    body = brief(agent, "What is the capital of Peru?").json
    assert body["abstain"] is True and body["grounding"] == [] and body["read_next"] == []
    [unknown] = body["unknowns"]
    assert unknown["kind"] == "abstain" and unknown["detail"].startswith(f"{body['abstain_code']}: ")
    said = {"role": "user", "name": "Dana", "content": "I moved to Porto in the spring."}
    queued = call("memory.set_from_messages", {"session_id": "s-1", "messages": [said], "defer": True}, agent.token)
    assert queued.status == 202, queued.json
    body = brief(agent, "Where does Dana live?", allow_synthesis=False).json
    assert body["pending_extraction"] >= 1
    assert "pending_extraction" in [unknown["kind"] for unknown in body["unknowns"]]


def test_a_contradiction_is_an_unknown_with_its_keys_and_the_history_to_read(
    backend, alice, call, settings, openai_llm, model_server
):
    settings.LOOM_CONFLICT_THRESHOLD, settings.LOOM_DUPLICATE_THRESHOLD = 0.5, 0.99  # (as test_conflict_resolver's)
    writer = alice.token("writer")
    write_the_pair(call, writer)
    model_server.script(judged("contradiction", "Both say what the user prefers now."))
    assert extraction_pass.run_due(org=alice.name) == 1
    body = call("memory.brief", {"query": "editor theme", "allow_synthesis": False}, writer).json
    contradiction = next(u for u in body["unknowns"] if u["kind"] == "contradiction")
    assert set(contradiction["memory_keys"]) == {"theme-then", "theme-now"}
    history = [step for step in body["read_next"] if step["op"] == "memory.get"]
    assert history and history[0]["arguments"]["history"] is True


def test_a_fact_from_a_conversation_points_to_its_turns(backend, agent, call):
    said = {"role": "user", "name": "Dana", "content": "I moved to Lisbon last month with my two cats."}
    assert call("memory.set_from_messages", {"session_id": "s-2", "messages": [said]}, agent.token).status == 201
    body = brief(agent, "When did Dana move to Lisbon with her cats?", allow_synthesis=False).json
    recall = [step for step in body["read_next"] if step["op"] == "memory.recall"]
    assert recall and recall[0]["arguments"]["memory_key"] in [g["memory_key"] for g in body["grounding"]]
