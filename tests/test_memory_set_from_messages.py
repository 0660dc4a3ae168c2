"""memory.set_from_messages: a conversation stored as its turns, and the facts it states extracted and written
through the ordinary write path; memory.recall reads the turns back. On the fake LLM the extraction's answer is
the turns' statements (retrieval/language/statements.py), so the rows are exact; the real SDK's path is driven
against the suite's model server."""

import json

import pytest

from retrieval.ingest import extraction_pass
from retrieval.store import extraction_queue
from tests.model_server import Answer

pytestmark = pytest.mark.cluster

CONVERSATION = {
    "session_id": "s1",
    "messages": [
        {
            "role": "user",
            "name": "Caroline",
            "content": "Hi Mel! I went to a support group yesterday and it was so powerful. How are you?",
            "created_at": "2023-05-08T13:56:00Z",
        },
        {
            "role": "assistant",
            "name": "Melanie",
            "content": "That's great! I love painting, it relaxes me. My kids are doing well.",
            "created_at": "2023-05-08T13:57:00Z",
        },
        {"role": "system", "content": "The assistant keeps a friendly tone in every reply."},
    ],
}


@pytest.fixture
def writer(alice):
    return alice.token("writer")


def test_a_conversation_is_stored_as_its_turns_and_the_facts_they_state(backend, call, writer):
    reply = call("memory.set_from_messages", CONVERSATION, writer)
    assert reply.status == 201, reply.json
    turns = [turn["memory_key"] for turn in reply.json["turns"]]
    assert len(turns) == 3 and all(key.startswith("turn.s1.") for key in turns)
    assert [(f["memory_key"], f["memory_type"], f["value"], f["source_keys"]) for f in reply.json["facts"]] == [
        (
            "event.caroline.i-went-to-a-support-group",
            "event",
            "Caroline: I went to a support group yesterday and it was so powerful.",
            [turns[0]],
        ),
        (
            "pref.melanie.i-love-painting-it-relaxes-me",
            "preference",
            "Melanie: I love painting, it relaxes me.",
            [turns[1]],
        ),
        ("fact.melanie.my-kids-are-doing-well", "fact", "Melanie: My kids are doing well.", [turns[1]]),
    ]
    assert (reply.json["extraction"], reply.json["model_calls"], reply.json["job_id"]) == ("done", 1, None)

    turn = call("memory.get", {"memory_key": turns[0]}, writer).json
    assert (turn["value"], turn["memory_type"], turn["session_id"], turn["tags"], turn["entities"]) == (
        "Caroline: Hi Mel! I went to a support group yesterday and it was so powerful. How are you?",
        "turn",
        "s1",
        ["role:user"],
        ["Caroline"],
    )
    fact = call("memory.get", {"memory_key": "pref.melanie.i-love-painting-it-relaxes-me"}, writer).json
    assert (fact["source_class"], fact["source_keys"], fact["session_id"], fact["valid_at"]) == (
        "extracted",
        [turns[1]],
        "",  # a fact about a person is the same fact whichever session said it
        "2023-05-08T13:57:00Z",
    )
    assert fact["entities"] == ["Melanie"]


def test_sent_again_nothing_is_stored_twice(backend, call, writer):
    first = call("memory.set_from_messages", CONVERSATION, writer).json
    again = call("memory.set_from_messages", CONVERSATION, writer)
    assert again.status == 200
    assert {item["outcome"] for item in again.json["turns"] + again.json["facts"]} == {"unchanged"}
    assert [f["memory_key"] for f in again.json["facts"]] == [f["memory_key"] for f in first["facts"]]
    listed = call("memory.list", {"limit": 100}, writer).json["items"]
    assert len(listed) == len(first["turns"]) + len(first["facts"])


def test_a_search_shows_a_fact_and_the_turn_it_came_from_once(backend, call, writer, alice):
    turns = [t["memory_key"] for t in call("memory.set_from_messages", CONVERSATION, writer).json["turns"]]
    reader = alice.token("viewer")
    body = {"query": "support group", "top_k": 10, "min_similarity": 0}
    hits = {hit["memory_key"]: hit for hit in call("memory.search", body, reader).json["hits"]}
    fact = "event.caroline.i-went-to-a-support-group"
    assert (fact in hits) != (turns[0] in hits), list(hits)  # one piece of evidence, one hit
    if fact in hits:
        assert hits[fact]["source_keys"] == [turns[0]]
    # Melanie's turn stated two facts: the best ranked of the three stands for the turn, one hit.
    melanie = {"pref.melanie.i-love-painting-it-relaxes-me", "fact.melanie.my-kids-are-doing-well", turns[1]}
    everything = {hit["memory_key"] for hit in call("memory.search", {**body, "query": "Melanie"}, reader).json["hits"]}
    assert len(everything & melanie) == 1, everything
    # A turn itself names no sources.
    assert all(hit["source_keys"] == [] for hit in hits.values() if hit["memory_type"] == "turn")


def test_the_same_message_twice_in_a_conversation_is_two_turns(backend, call, writer):
    said = {"role": "user", "name": "Dana", "content": "I will call the vendor tomorrow morning."}
    reply = call("memory.set_from_messages", {"session_id": "s2", "messages": [said, said]}, writer).json
    assert len({turn["memory_key"] for turn in reply["turns"]}) == 2
    assert len(reply["facts"]) == 1  # one fact, from both


def test_recall_reads_a_facts_turns_and_a_sessions_turns_in_order_a_page_at_a_time(backend, call, writer):
    turns = [t["memory_key"] for t in call("memory.set_from_messages", CONVERSATION, writer).json["turns"]]
    by_fact = call("memory.recall", {"memory_key": "fact.melanie.my-kids-are-doing-well"}, writer).json
    assert [t["memory_key"] for t in by_fact["turns"]] == [turns[1]] and by_fact["reason"] is None
    page = call("memory.recall", {"session_id": "s1", "limit": 2}, writer).json
    assert [t["memory_key"] for t in page["turns"]] == turns[:2] and page["next_cursor"]
    rest = call("memory.recall", {"session_id": "s1", "limit": 2, "cursor": page["next_cursor"]}, writer).json
    assert [t["memory_key"] for t in rest["turns"]] == turns[2:] and rest["next_cursor"] is None
    assert call("memory.recall", {"memory_key": turns[0]}, writer).json["turns"][0]["memory_key"] == turns[0]
    call("memory.set", {"memory_key": "plain", "value": "written by hand"}, writer)
    assert call("memory.recall", {"memory_key": "plain"}, writer).json["reason"] == "source_has_no_turns"
    assert call("memory.recall", {"memory_key": "nope"}, writer).json["reason"] == "source_not_found"
    assert call("memory.recall", {}, writer).error == "MISSING_FIELD"
    assert call("memory.recall", {"session_id": "s1", "cursor": "junk"}, writer).error == "INVALID_CURSOR"


@pytest.mark.parametrize(
    "body,status,code,field",
    [
        ({"session_id": "s", "messages": []}, 422, "INVALID_VALUE", "messages"),
        (
            {"session_id": "s", "messages": [{"role": "robot", "content": "x"}]},
            422,
            "INVALID_VALUE",
            "messages[0].role",
        ),
        ({"session_id": "s", "messages": [{"role": "user", "content": "x"}] * 201}, 422, "TOO_MANY_ITEMS", "messages"),
        (
            {"session_id": "s", "messages": [{"role": "user", "content": ""}]},
            422,
            "INVALID_VALUE",
            "messages[0].content",
        ),
        ({"messages": [{"role": "user", "content": "x"}]}, 422, "MISSING_FIELD", "session_id"),
        ({"session_id": "s", "messages": [{"role": "user", "text": "x"}]}, 422, "UNKNOWN_FIELD", "messages[0].text"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_stores_nothing(backend, call, writer, body, status, code, field):
    reply = call("memory.set_from_messages", body, writer)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (status, code, field), reply.json
    assert call("memory.list", {}, writer).json["items"] == []


def test_a_message_over_the_value_limit_is_refused(backend, call, writer, settings):
    settings.LOOM_MEMORY_VALUE_MAX_BYTES = 100
    body = {"session_id": "s", "messages": [{"role": "user", "content": "x" * 101}]}
    reply = call("memory.set_from_messages", body, writer)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (413, "VALUE_TOO_LARGE", "messages[0].content")


def test_a_viewer_cannot_write_a_conversation(backend, alice, call):
    assert call("memory.set_from_messages", CONVERSATION, alice.token("viewer")).error == "ROLE_FORBIDDEN"


def test_model_calls_are_bounded_by_the_batch_not_one_per_turn(backend, call, writer, settings):
    settings.LOOM_MEMORY_EXTRACT_BATCH_TURNS = 40
    messages = [{"role": "user", "name": "Dana", "content": f"I finished report number {i} today."} for i in range(90)]
    reply = call("memory.set_from_messages", {"session_id": "s3", "messages": messages}, writer).json
    assert reply["model_calls"] == 3 and len(reply["facts"]) == 90


def test_deferred_the_turns_are_stored_now_and_the_facts_once_the_queue_runs(backend, alice, call, writer):
    reply = call("memory.set_from_messages", {**CONVERSATION, "defer": True}, writer)
    assert reply.status == 202 and reply.json["extraction"] == "queued" and reply.json["facts"] == []
    assert reply.json["job_id"]
    searched = call("memory.search", {"query": "what does Melanie love?", "min_similarity": 0}, writer).json
    assert searched["pending_extraction"] == 1  # the answer is not all there is yet
    assert extraction_pass.run_due(org=alice.name) == 1
    searched = call("memory.search", {"query": "what does Melanie love?", "min_similarity": 0}, writer).json
    assert searched["pending_extraction"] == 0
    assert "pref.melanie.i-love-painting-it-relaxes-me" in [hit["memory_key"] for hit in searched["hits"]]
    fact = call("memory.get", {"memory_key": "pref.melanie.i-love-painting-it-relaxes-me"}, writer).json
    assert (
        fact["actor"] == call("memory.get", {"memory_key": reply.json["turns"][0]["memory_key"]}, writer).json["actor"]
    )


# --- the real SDK against the suite's model server ------------------------------------------------------------------

SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def extracted(*facts: dict) -> Answer:
    return Answer(content=json.dumps({"facts": list(facts)}))


def a_fact(key: str, value: str, turns: list[int], kind: str = "fact") -> dict:
    return {"key": key, "value": value, "type": kind, "entities": ["Dana"], "triples": [], "turns": turns}


def test_through_the_sdk_a_secret_never_reaches_the_model(
    backend, call, writer, openai_embedder, openai_llm, model_server
):
    """A turn holding a secret is stored high and left out of the extraction prompt: no request body holds it."""
    # The extraction first, then the embeddings of the turns and the fact, one batch (the secret's turn is never
    # embedded).
    model_server.script(extracted(a_fact("pref.dana.contact", "Dana prefers email.", [0], "preference")), Answer())
    body = {
        "session_id": "s4",
        "messages": [
            {"role": "user", "name": "Dana", "content": "Please reach me by email, not phone."},
            {"role": "user", "name": "Dana", "content": f"Our Stripe key is {SECRET} for billing."},
        ],
    }
    reply = call("memory.set_from_messages", body, writer).json
    assert [turn["sensitivity"] for turn in reply["turns"]] == ["low", "high"]
    assert [(f["memory_key"], f["value"]) for f in reply["facts"]] == [("pref.dana.contact", "Dana prefers email.")]
    [chat] = model_server.chat_requests()
    assert "reach me by email" in json.dumps(chat.body) and chat.body["response_format"]["type"] == "json_schema"
    assert not [seen for seen in model_server.requests if SECRET in json.dumps(seen.body)]


def test_a_key_the_model_proposes_is_made_safe_and_turns_it_invents_are_dropped(
    backend, call, writer, openai_llm, model_server
):
    model_server.script(
        extracted(
            a_fact("Pref / Editor!!", "Dana uses vim.", [0], "preference"),
            a_fact("fact.dana.ghost", "Dana said nothing of this.", [7]),  # no such turn: dropped
        )
    )
    body = {"session_id": "s5", "messages": [{"role": "user", "name": "Dana", "content": "I use vim for everything."}]}
    reply = call("memory.set_from_messages", body, writer).json
    assert [f["memory_key"] for f in reply["facts"]] == ["pref.pref-editor"]


@pytest.mark.parametrize(
    "failure",
    [
        [Answer(content="not json"), Answer(content="{still not")],  # malformed, then malformed once more
        [Answer(status=500)] * 3,  # the provider down through its retries
        [Answer(delay_s=3)],  # the model times out
        [Answer(402, code="budget_exceeded")],  # the gateway refuses the writer's call
    ],
    ids=["malformed", "provider_down", "timeout", "gateway_refused"],
)
def test_a_failing_model_leaves_the_turns_stored_and_the_job_queued_until_it_answers(
    backend, alice, call, writer, openai_llm, model_server, settings, failure
):
    settings.LOOM_LLM_RETRY_ATTEMPTS = 3 if failure[0].status == 500 else 1
    settings.LOOM_LLM_REQUEST_TIMEOUT_S = 1
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = '{"X-Subject": "{subject}"}'
    model_server.script(*failure)
    body = {"session_id": "s6", "messages": [{"role": "user", "name": "Dana", "content": "I moved to Lisbon in May."}]}
    reply = call("memory.set_from_messages", body, writer)
    assert reply.status == 201 and reply.json["extraction"] == "queued" and reply.json["facts"] == []
    assert reply.json["error"] and reply.json["job_id"]
    turn = reply.json["turns"][0]["memory_key"]
    assert call("memory.get", {"memory_key": turn}, writer).status == 200  # the turns are the commit
    assert call("memory.list", {}, writer).json["items"][0]["memory_key"] == turn  # and nothing half-written
    assert len(call("memory.list", {}, writer).json["items"]) == 1

    [job] = call("extraction.list", {}, writer).json["jobs"]
    assert (job["state"], job["attempts"], job["error"], job["turn_keys"]) == (
        "pending",
        1,
        reply.json["error"],
        [turn],
    )
    assert extraction_pass.run_due(org=alice.name) == 0  # backing off
    assert call("extraction.retry", {"job_id": job["job_id"]}, writer).json["jobs"][0]["attempts"] == 0
    model_server.script(extracted(a_fact("event.dana.moved-to-lisbon", "Dana moved to Lisbon in May.", [0], "event")))
    assert extraction_pass.run_due(org=alice.name) == 1
    [job] = call("extraction.list", {}, writer).json["jobs"]
    assert (job["state"], job["facts"], job["error"]) == ("done", 1, "")
    assert call("memory.get", {"memory_key": "event.dana.moved-to-lisbon"}, writer).json["source_keys"] == [turn]


def test_a_job_that_keeps_failing_is_failed_with_its_error(
    backend, alice, call, writer, openai_llm, model_server, monkeypatch
):
    monkeypatch.setattr(extraction_queue, "BACKOFF_S", 0)  # due again at once: the test does not wait it out
    model_server.script(*[Answer(content="nope")] * (2 * extraction_queue.MAX_ATTEMPTS))  # each attempt asks twice
    body = {"session_id": "s7", "messages": [{"role": "user", "name": "Dana", "content": "I moved to Lisbon in May."}]}
    call("memory.set_from_messages", body, writer)
    while extraction_pass.run_due(org=alice.name):
        pass
    [job] = call("extraction.list", {"state": "failed"}, writer).json["jobs"]
    assert job["attempts"] == extraction_queue.MAX_ATTEMPTS and "no readable facts to prompt extract-v1" in job["error"]
    assert len(model_server.chat_requests()) == 2 * extraction_queue.MAX_ATTEMPTS
    # An operator retries every failed job of the namespace; an unknown job is named as such.
    assert [j["state"] for j in call("extraction.retry", {}, writer).json["jobs"]] == ["pending"]
    missing = call("extraction.retry", {"job_id": "no-such-job"}, writer)
    assert (missing.status, missing.error, missing.json["error"]["field"]) == (404, "JOB_NOT_FOUND", "job_id")
    assert call("extraction.retry", {}, alice.token("viewer")).error == "ROLE_FORBIDDEN"


def test_with_the_orgs_model_calls_off_the_turns_are_stored_and_nothing_is_extracted(
    backend, alice, call, writer, openai_llm, model_server
):
    admin = alice.token("admin")
    call("org.set_model_calls", {"enabled": False, "reason": "audit"}, admin)
    reply = call("memory.set_from_messages", CONVERSATION, writer).json
    assert reply["extraction"] == "queued" and "ModelCallsOff" in reply["error"] and reply["facts"] == []
    assert model_server.chat_requests() == []
    call("org.set_model_calls", {"enabled": True, "reason": "done"}, admin)


def test_a_pinned_memory_is_not_overwritten_by_a_fact_of_its_key(backend, call, writer):
    key = "pref.melanie.i-love-painting-it-relaxes-me"
    call("memory.set", {"memory_key": key, "value": "Melanie loves pottery most.", "pinned": True}, writer)
    reply = call("memory.set_from_messages", CONVERSATION, writer)
    assert reply.status == 201 and key not in [fact["memory_key"] for fact in reply.json["facts"]]
    assert call("memory.get", {"memory_key": key}, writer).json["value"] == "Melanie loves pottery most."


def test_a_key_pinned_while_the_model_answered_leaves_the_turns_stored_and_the_job_queued(
    backend, call, writer, monkeypatch
):
    """Between the pinned check and the write, a person pins a fact's key: the batch of turns and facts is refused,
    and the turns are stored alone (the commit), the extraction queued to try again."""
    from retrieval.ingest import conversation

    key = "pref.melanie.i-love-painting-it-relaxes-me"
    checked = conversation.fact_inputs

    def pinned_meanwhile(*args):
        facts = checked(*args)
        call("memory.set", {"memory_key": key, "value": "Melanie loves pottery most.", "pinned": True}, writer)
        return facts

    monkeypatch.setattr(conversation, "fact_inputs", pinned_meanwhile)
    reply = call("memory.set_from_messages", CONVERSATION, writer)
    assert reply.status == 201 and reply.json["extraction"] == "queued", reply.json
    assert reply.json["error"].startswith("MEMORY_PINNED") and reply.json["facts"] == []
    assert all(call("memory.get", {"memory_key": t["memory_key"]}, writer).status == 200 for t in reply.json["turns"])
    assert call("memory.get", {"memory_key": key}, writer).json["value"] == "Melanie loves pottery most."


def test_extract_pending_runs_the_queue_on_a_clickhouse_server(backend, alice, call, writer):
    """A ClickHouse server's deployment drains the queue with `manage.py extract_pending` (the server's own worker
    runs only on the embedded engine)."""
    from io import StringIO

    from django.core.management import call_command

    call("memory.set_from_messages", {**CONVERSATION, "defer": True}, writer)
    out = StringIO()
    call_command("extract_pending", "--org", alice.name, stdout=out)
    assert out.getvalue().strip() == "ran 1 jobs"
    assert call("memory.get", {"memory_key": "fact.melanie.my-kids-are-doing-well"}, writer).status == 200
    out = StringIO()
    call_command("extract_pending", "--org", alice.name, stdout=out)
    assert out.getvalue().strip() == "nothing to extract"


def test_a_thousand_deferred_turns_drain_with_nothing_lost_across_a_model_outage(
    backend, alice, call, writer, openai_llm, model_server, monkeypatch, settings
):
    """1,000 turns queued in five conversations; the model server is stopped after the second job and started
    again on the same port: the jobs that met the outage back off and are retried, and every turn's facts are
    stored once. The queue is the engine's: nothing of it lives in the process (its copies dropped meanwhile)."""
    from retrieval import caching
    from retrieval.ingest import extraction

    monkeypatch.setattr(extraction_queue, "BACKOFF_S", 0)  # due again at once
    settings.LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED = False  # near-identical reports: no judge asked here
    model_server.respond = extraction.fake_answer  # a model that states what the turns state
    for n in range(5):
        messages = [{"role": "user", "name": "Dana", "content": f"I filed report {n}-{i} today."} for i in range(200)]
        reply = call("memory.set_from_messages", {"session_id": f"s{n}", "messages": messages, "defer": True}, writer)
        assert reply.status == 202
    assert extraction_pass.run_due(limit=2, org=alice.name) == 2
    port = int(model_server.url.rsplit(":", 1)[1].split("/")[0])
    model_server.stop()
    assert extraction_pass.run_due(limit=1, org=alice.name) == 1  # meets the outage: backs off
    caching.forget_all()
    model_server.start(port)
    while extraction_pass.run_due(org=alice.name):
        pass
    jobs = call("extraction.list", {}, writer).json["jobs"]
    assert sorted(job["state"] for job in jobs) == ["done"] * 5 and sum(job["facts"] for job in jobs) == 1000
    assert max(job["attempts"] for job in jobs) == 1  # the one that met the outage, retried once
    facts = [
        item for item in call("memory.list", {"limit": 1000}, writer).json["items"] if item["memory_type"] != "turn"
    ]
    assert len(facts) == 1000
