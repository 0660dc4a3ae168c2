"""session_summary.set / .delete and the digest leg: a session's digest is a hit of its own (`source: "summary"`)
and pulls its session's rows up the ranking (digest descent)."""

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from retrieval.providers import llm
from tests.conftest import Agent
from tests.model_server import Answer

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

API_DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
HIKE = "Sounds good, count me in for that one"


def summaries(agent: Agent, *items: dict, **common):
    return agent.call(
        "session_summary.set", {"namespace": agent.namespace, "items": list(items), **common}, agent.token
    )


def turns(agent: Agent):
    """The same turn said in two sessions: equally near any query, so only the ranking's terms can order them."""
    agent.set(
        {"memory_key": "a:1", "value": HIKE, "session_id": "s-a", "memory_type": "turn"},
        {"memory_key": "b:1", "value": HIKE, "session_id": "s-b", "memory_type": "turn"},
    )


def test_a_summary_is_stored_then_unchanged_then_updated(backend, agent):
    first = summaries(agent, {"session_id": "s-1", "summary": "They planned the spring offsite in Lisbon."})
    assert first.status == 201, first.json
    item = first.json["items"][0]
    assert (item["outcome"], item["sensitivity"], item["embedding_model"]) == ("created", "low", "fake-ngram-384")
    again = summaries(agent, {"session_id": "s-1", "summary": "They planned the spring offsite in Lisbon."})
    assert again.status == 200 and again.json["items"][0]["outcome"] == "unchanged"
    assert again.json["items"][0]["version"] == item["version"]
    changed = summaries(agent, {"session_id": "s-1", "summary": "They moved the spring offsite to Porto."})
    assert changed.json["items"][0]["outcome"] == "updated" and changed.json["items"][0]["version"] > item["version"]


def test_a_batch_naming_a_session_twice_stores_the_later_summary(backend, agent):
    reply = summaries(
        agent, {"session_id": "s-1", "summary": "They planned the offsite."}, {"session_id": "s-1", "summary": "Porto."}
    )
    assert reply.status == 201 and [item["outcome"] for item in reply.json["items"]] == ["created"]
    assert summaries(agent, {"session_id": "s-1", "summary": "Porto."}).json["items"][0]["outcome"] == "unchanged"


def test_a_question_about_a_session_is_served_its_summary(backend, ranker):
    turns(ranker)
    summaries(ranker, {"session_id": "s-b", "summary": "Planning a hiking trip to the Alps in June."})
    plain = ranker.search("planning the hiking trip to the Alps").json["hits"]  # not about a session as a whole
    assert plain and all(hit["source"] != "summary" for hit in plain)
    reply = ranker.search("what did we discuss about the hiking trip to the Alps", top_k=3)
    assert reply.status == 200, reply.json
    digest = [hit for hit in reply.json["hits"] if hit["source"] == "summary"]
    assert len(digest) == 1
    assert digest[0]["memory_key"] == "summary:s-b" and digest[0]["session_id"] == "s-b"
    assert digest[0]["content_excerpt"] == "Planning a hiking trip to the Alps in June."
    assert digest[0]["memory_type"] == "summary"


def test_digest_descent_lifts_the_rows_of_the_session_the_question_is_about(backend, ranker):
    turns(ranker)
    query = "who is coming on the hiking trip to the Alps"
    before = [hit["memory_key"] for hit in ranker.search(query, top_k=3).json["hits"]]
    assert before.index("a:1") < before.index("b:1")  # a tie, broken by name
    defaults = {"min_similarity": 0, "digest_descent": 0.05}  # off unless the namespace turns it on
    ranker.call("namespace.register", {"namespace": "default", "retrieval_defaults": defaults}, ranker.token)
    summaries(
        ranker,
        {"session_id": "s-a", "summary": "A long talk about the quarterly budget review."},
        {"session_id": "s-b", "summary": "Who is coming on the hiking trip to the Alps."},
    )
    reply = ranker.search(query, top_k=3, explain=True)
    hits = {hit["memory_key"]: hit for hit in reply.json["hits"]}
    order = [hit["memory_key"] for hit in reply.json["hits"] if hit["source"] != "summary"]
    assert order.index("b:1") < order.index("a:1")
    assert hits["b:1"]["score_components"]["session_digest"] > hits["a:1"]["score_components"].get("session_digest", 0)


def test_a_filter_a_digest_cannot_answer_keeps_digests_out_of_the_window(backend, ranker):
    turns(ranker)
    summaries(ranker, {"session_id": "s-b", "summary": "Planning a hiking trip to the Alps in June."})
    typed = ranker.search("what did we discuss about the hiking trip to the Alps", memory_type="turn").json["hits"]
    assert typed and all(hit["source"] != "summary" for hit in typed)
    other_session = ranker.search("what did we discuss about the hiking trip to the Alps", session_id="s-a").json[
        "hits"
    ]
    assert all(hit["source"] != "summary" for hit in other_session)
    own = ranker.search("what did we discuss about the hiking trip to the Alps", session_id="s-b").json["hits"]
    assert [hit["memory_key"] for hit in own if hit["source"] == "summary"] == ["summary:s-b"]


def test_another_org_never_sees_a_digest(backend, alice, bob, call):
    alices, bobs = Agent(call, alice.token("writer")), Agent(call, bob.token("writer"))
    summaries(alices, {"session_id": "s-1", "summary": "Alice's team chose the vendor Northwind."})
    bobs.set({"memory_key": "note", "value": "Bob's team chose nothing yet"})
    hits = bobs.search("what did the team discuss about the vendor").json["hits"]
    assert all(hit["source"] != "summary" for hit in hits)


def test_a_summary_holding_a_secret_is_stored_high_and_never_served(backend, agent):
    secret = "Dana shared the deploy password: hunter2-Deploy!, and the API key sk-test-abcdefghijklmnop1234"
    reply = summaries(agent, {"session_id": "s-9", "summary": secret})
    item = reply.json["items"][0]
    assert (item["sensitivity"], item["embedding_model"]) == ("high", "")
    hits = agent.search("the session where Dana shared the deploy password").json["hits"]
    assert all(hit["source"] != "summary" for hit in hits)


def test_a_deleted_summary_is_no_longer_served(backend, agent):
    summaries(agent, {"session_id": "s-1", "summary": "They planned the spring offsite in Lisbon."})
    assert agent.search("the meeting on the spring offsite in Lisbon").json["hits"][0]["source"] == "summary"
    gone = agent.call("session_summary.delete", {"namespace": "default", "session_id": "s-1"}, agent.token)
    assert gone.json == {"session_id": "s-1", "deleted": 1}
    again = agent.call("session_summary.delete", {"namespace": "default", "session_id": "s-1"}, agent.token)
    assert again.json["deleted"] == 0
    assert all(
        hit["source"] != "summary" for hit in agent.search("the meeting on the spring offsite in Lisbon").json["hits"]
    )


def test_with_the_orgs_model_calls_off_a_summary_waits_unembedded_until_embed_pending(backend, agent):
    agent.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, agent.token)
    reply = summaries(agent, {"session_id": "s-1", "summary": "They planned the spring offsite in Lisbon."})
    assert reply.status == 201 and reply.json["items"][0]["embedding_pending"] is True
    call_command("embed_pending")  # still off: the stub is left alone
    agent.call("org.set_model_calls", {"enabled": True, "reason": "done"}, agent.token)
    assert all(
        hit["source"] != "summary" for hit in agent.search("the meeting on the spring offsite in Lisbon").json["hits"]
    )
    call_command("embed_pending")
    assert agent.search("the meeting on the spring offsite in Lisbon").json["hits"][0]["memory_key"] == "summary:s-1"


@pytest.mark.parametrize(
    "body,code,field",
    [
        ({"items": [{"summary": "x"}]}, "MISSING_FIELD", "items[0].session_id"),
        ({"items": [{"session_id": "s-1"}]}, "MISSING_FIELD", "items[0].summary"),
        ({"items": [{"session_id": "s-1", "summary": "   "}]}, "INVALID_VALUE", "items[0].summary"),
        ({"items": []}, "INVALID_VALUE", "items"),
        (
            {"items": [{"session_id": "s-1", "summary": "x", "session_date": "last week"}]},
            "INVALID_VALUE",
            "items[0].session_date",
        ),
        ({"items": [{"session_id": "s-1", "summary": "x", "mood": "calm"}]}, "UNKNOWN_FIELD", "items[0].mood"),
    ],
)
def test_a_bad_summary_is_refused_naming_its_field_and_nothing_is_stored(backend, agent, body, code, field):
    reply = agent.call("session_summary.set", {"namespace": "default", **body}, agent.token)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (422, code, field), reply.json
    assert all(hit["source"] != "summary" for hit in agent.search("x").json["hits"])


def test_a_viewer_may_not_write_a_summary(backend, alice, call):
    reply = call("session_summary.set", {"items": [{"session_id": "s", "summary": "x"}]}, alice.token("viewer"))
    assert (reply.status, reply.error) == (403, "ROLE_FORBIDDEN")


def test_the_documented_example_runs(backend, agent):
    section = API_DOC.read_text().split("## session_summary.set")[1].split("\n## ")[0]
    bodies = re.findall(r"-d '(\{.*?\})'", section, re.S)
    assert bodies, "docs/api.md lost its session_summary.set example"
    reply = agent.call("session_summary.set", json.loads(bodies[0]), agent.token)
    assert reply.status == 201 and [item["outcome"] for item in reply.json["items"]] == ["created", "created"]
    search = agent.call("memory.search", json.loads(bodies[1]), agent.token)
    assert search.json["hits"][0]["memory_key"] == "summary:s-14" and search.json["hits"][0]["source"] == "summary"


def test_summarize_sessions_writes_a_digest_for_each_session_that_has_none(backend, openai_llm, model_server, agent):
    agent.set(
        {"memory_key": "t1", "value": "We picked Porto for the offsite", "session_id": "s-1", "memory_type": "turn"},
        {"memory_key": "t2", "value": "Flights are booked for May", "session_id": "s-1", "memory_type": "turn"},
        {"memory_key": "t3", "value": "Budget review moved to June", "session_id": "s-2", "memory_type": "turn"},
    )
    summaries(agent, {"session_id": "s-2", "summary": "The budget review moved to June."})
    model_server.script(Answer(content="They chose Porto for the offsite and booked May flights."))
    out = StringIO()
    call_command("summarize_sessions", "--org", agent_org(agent), stdout=out)
    assert out.getvalue().strip() == "1 session digests written"
    prompt = model_server.chat_requests()[0].body["messages"][-1]["content"]
    assert "We picked Porto for the offsite" in prompt and "Budget review" not in prompt  # s-2 had its digest
    hits = agent.search("what did we discuss about the offsite in Porto").json["hits"]
    assert "summary:s-1" in [hit["memory_key"] for hit in hits]
    call_command("summarize_sessions", "--org", agent_org(agent), stdout=(again := StringIO()))
    assert again.getvalue().strip() == "0 session digests written" and len(model_server.chat_requests()) == 1


def test_summarize_sessions_invents_nothing_without_an_llm_nor_for_a_switched_off_org(
    backend, openai_llm, model_server, agent, settings
):
    agent.set({"memory_key": "t1", "value": "We picked Porto", "session_id": "s-1", "memory_type": "turn"})
    agent.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, agent.token)
    call_command("summarize_sessions", "--org", agent_org(agent), stdout=(out := StringIO()))
    assert out.getvalue().strip() == "0 session digests written" and model_server.chat_requests() == []
    agent.call("org.set_model_calls", {"enabled": True, "reason": "done"}, agent.token)
    settings.LOOM_LLM_MODEL = ""
    settings.OPENAI_API_KEY = ""
    llm.forget()
    call_command("summarize_sessions", stdout=StringIO(), stderr=(err := StringIO()))
    assert "no digest written" in err.getvalue() and model_server.chat_requests() == []


def agent_org(agent: Agent) -> str:
    return agent.call("org.get_model_calls", {}, agent.token).json["org"]
