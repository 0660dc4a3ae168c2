"""Computed evidence: a count, a date difference, the latest of a key's rows, beside the hits (`computed`)."""

from datetime import date

import pytest

from retrieval.store import clickhouse
from tests.test_vector_mirror import wait_for_mirror

BEACH = [
    {"memory_key": "m1", "value": "Melanie went to the beach with her kids", "valid_at": "2023-05-08T10:00:00Z"},
    {"memory_key": "m2", "value": "Melanie took the kids to the beach again", "valid_at": "2023-06-20T10:00:00Z"},
    {"memory_key": "m3", "value": "Melanie painted a sunrise over the lake", "valid_at": "2023-07-01T10:00:00Z"},
    {"memory_key": "c1", "value": "Caroline ran along the beach at dawn", "valid_at": "2023-07-10T10:00:00Z"},
]


def computed(reply, kind: str) -> dict:
    found = [item for item in reply.json["computed"] if item["kind"] == kind]
    assert len(found) == 1, reply.json["computed"]
    return found[0]


def test_a_count_counts_the_rows_that_mention_what_the_question_is_about(backend, ranker):
    ranker.set(*BEACH)
    reply = ranker.search("How many times did Melanie go to the beach?")
    count = computed(reply, "count")
    assert count["value"] == 2 and [row["memory_key"] for row in count["computed_from"]] == ["m1", "m2"]
    assert count["text"] == "2 memories mention melanie beach, 2023-05-08 to 2023-06-20"


def test_a_count_honours_the_requests_filters(backend, ranker):
    ranker.set(*BEACH, {"memory_key": "m4", "value": "Melanie swam at the beach", "memory_type": "observation"})
    assert computed(ranker.search("How many times did Melanie go to the beach?"), "count")["value"] == 3
    typed = ranker.search("How many times did Melanie go to the beach?", memory_type="fact")
    assert computed(typed, "count")["value"] == 2


def test_a_count_of_something_no_row_mentions_computes_nothing(backend, ranker):
    ranker.set(*BEACH)
    assert ranker.search("How many times did we go skydiving?").json["computed"] == []


def test_how_long_ago_is_counted_from_the_best_hit_to_the_observation_date(backend, ranker):
    ranker.set(*BEACH)
    reply = ranker.search("How long ago did Melanie paint the sunrise over the lake?", observation_date="2023-07-31")
    diff = computed(reply, "temporal_diff")
    assert diff["value"] == 30 and diff["computed_from"][0]["memory_key"] == "m3"


def test_how_long_between_two_events_is_the_days_between_the_two_best_dated_hits(backend, ranker):
    ranker.set(
        {"memory_key": "offsite", "value": "The spring offsite happened in Lisbon", "valid_at": "2026-03-02T09:00:00Z"},
        {"memory_key": "launch", "value": "The product launch happened in Berlin", "valid_at": "2026-04-13T09:00:00Z"},
    )
    reply = ranker.search("How many days passed between the spring offsite and the product launch?")
    diff = computed(reply, "temporal_diff")
    assert diff["value"] == (date(2026, 4, 13) - date(2026, 3, 2)).days
    assert {row["memory_key"] for row in diff["computed_from"]} == {"offsite", "launch"}


def test_the_latest_value_of_a_key_is_its_newest_row(backend, ranker):
    ranker.set(
        *BEACH,
        {
            "memory_key": "acme.plan",
            "value": "Acme is on the Starter plan",
            "session_id": "s-1",
            "valid_at": "2025-01-05T09:00:00Z",
        },
        {
            "memory_key": "acme.plan",
            "value": "Acme is on the Enterprise plan",
            "session_id": "s-2",
            "valid_at": "2026-02-01T09:00:00Z",
        },
        {
            "memory_key": "acme.plan",
            "value": "Acme is on the Growth plan",
            "session_id": "s-3",
            "valid_at": "2025-08-01T09:00:00Z",
        },
    )
    latest = computed(ranker.search("What is Acme's current plan?"), "latest")
    assert latest["value"] == "Acme is on the Enterprise plan" and latest["computed_from"][0]["session_id"] == "s-2"
    assert latest["text"].startswith("the newest of 3 rows of acme.plan (2026-02-01)")


@pytest.mark.parametrize("cap", [1])
def test_a_count_or_a_date_difference_is_exempt_from_the_per_key_cap(backend, ranker, settings, cap):
    settings.LOOM_MEMORY_SEARCH_PER_KEY_CAP = cap
    ranker.set(
        *[
            {"memory_key": "beach.trip", "value": f"Melanie went to the beach, trip {n}", "session_id": f"s-{n}"}
            for n in range(3)
        ]
    )
    assert len(ranker.hits("Did Melanie go to the beach?")) == cap
    assert len(ranker.hits("How many times did Melanie go to the beach?")) == 3


def test_no_intent_computes_nothing(backend, ranker):
    ranker.set(*BEACH)
    assert ranker.search("Where did Melanie paint the sunrise?").json["computed"] == []


def test_memory_ask_hands_the_computed_evidence_to_the_model(backend, openai_llm, model_server, ranker):
    from tests.model_server import Answer

    ranker.set(*BEACH)
    model_server.script(Answer(content="Twice [1]."))
    reply = ranker.call("memory.ask", {"query": "How many times did Melanie go to the beach?"}, ranker.token)
    assert reply.status == 200 and reply.json["computed"][0]["value"] == 2
    prompt = model_server.chat_requests()[0].body["messages"][-1]["content"]
    assert "<computed>\n- 2 memories mention melanie beach, 2023-05-08 to 2023-06-20\n</computed>" in prompt


def test_a_count_from_the_mirror_is_the_engines_count(backend, agent, settings):
    # A namespace the mirror holds is counted from its postings, with no statement, and counts what the engine's
    # statement counts: not a duplicate, a superseded or a deleted row.
    agent.set(*BEACH)
    agent.set(
        {"memory_key": "m1", "value": "Melanie went to the beach with her kids and the dog"},  # supersedes m1
        {"memory_key": "m2-copy", "value": "Melanie took the kids to the beach again"},  # a duplicate of m2
        {"memory_key": "m5", "value": "Melanie left the beach early"},
    )
    assert agent.call("memory.delete", {"memory_key": "m5"}, agent.token).status == 200
    wait_for_mirror(agent)
    question = "How many times did Melanie go to the beach?"
    with clickhouse.recorded() as statements:
        mirrored = agent.search(question)
    assert not [statement for statement in statements if "memory_terms" in statement]
    assert [row["memory_key"] for row in computed(mirrored, "count")["computed_from"]] == ["m2", "m1"]
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search(question).json["computed"] == mirrored.json["computed"]


def test_the_latest_from_the_mirror_is_the_engines_latest(backend, agent, settings):
    # Found by the key's words in the mirror's postings, the newest row's value from the mirror: no statement; the
    # same answer as the engine's, which leaves out a superseded and a deleted row of the key.
    plan = {"memory_key": "acme.plan", "value": "Acme is on the Starter plan", "session_id": "s-1"}
    agent.set(
        *BEACH,
        {**plan, "valid_at": "2025-01-05T09:00:00Z"},
        {**plan, "value": "Acme is on the Growth plan", "session_id": "s-2", "valid_at": "2025-08-01T09:00:00Z"},
        {**plan, "value": "Acme is on the Enterprise plan", "session_id": "s-3", "valid_at": "2026-02-01T09:00:00Z"},
        # Another key whose rows hold the key's words: found in the postings with acme.plan's rows, left out.
        {"memory_key": "acme.planning", "value": "Acme is planning a plan review", "valid_at": "2026-03-01T09:00:00Z"},
    )
    agent.set({**plan, "value": "Acme is on the Growth plan, billed yearly", "session_id": "s-2"})  # supersedes
    body = {"namespace": agent.namespace, "memory_key": "acme.plan", "session_id": "s-3"}
    assert agent.call("memory.delete", body, agent.token).status == 200
    wait_for_mirror(agent)
    question = "What is Acme's current plan?"
    with clickhouse.recorded() as statements:
        mirrored = agent.search(question)
    evidence = ("ORDER BY dated_at DESC", "argMax(value, revision)")  # the key's rows, the newest one's value
    assert not [statement for statement in statements if any(part in statement for part in evidence)]
    latest = computed(mirrored, "latest")
    assert [row["session_id"] for row in latest["computed_from"]] == ["s-2", "s-1"]
    assert latest["value"] == "Acme is on the Growth plan, billed yearly"
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search(question).json["computed"] == mirrored.json["computed"]


BOOKS = [
    {"memory_key": "b1", "value": "I spent $24.50 on books at the fair", "valid_at": "2023-03-02T10:00:00Z"},
    {"memory_key": "b2", "value": "Bought two more books online for 18 dollars", "valid_at": "2023-04-11T10:00:00Z"},
    {"memory_key": "b3", "value": "The library books are due on Friday", "valid_at": "2023-04-20T10:00:00Z"},
    {"memory_key": "g1", "value": "Groceries came to $61 this week", "valid_at": "2023-04-21T10:00:00Z"},
    {"memory_key": "p1", "value": "Practiced the guitar for 90 minutes", "valid_at": "2023-05-01T10:00:00Z"},
    {"memory_key": "p2", "value": "Two hours of guitar practice, 2 hours", "valid_at": "2023-05-03T10:00:00Z"},
]


def test_a_sum_adds_the_amounts_the_rows_about_the_subject_state(backend, ranker):
    ranker.set(*BOOKS)
    total = computed(ranker.search("How much did I spend on books in total?"), "sum")
    assert (total["value"], total["unit"]) == (42.5, "USD")  # the library's due date states no amount
    assert [row["memory_key"] for row in total["computed_from"]] == ["b1", "b2"]
    assert total["text"] == (
        "42.5 USD in total, stated by 2 memories mentioning books, 2023-03-02 to 2023-04-11 ($24.50, 18 dollars)"
    )


def test_a_sum_of_hours_counts_minutes_as_hours(backend, ranker):
    ranker.set(*BOOKS)
    total = computed(ranker.search("How many hours did I practice guitar?"), "sum")
    assert (total["value"], total["unit"]) == (3.5, "hour")


def test_a_sum_honours_the_requests_filters_and_a_high_row_states_nothing(backend, ranker):
    ranker.set(*BOOKS, {"memory_key": "b4", "value": "books card sk_live_4eC39HqLyjWDarjtT1zdp7dc cost $500"})
    assert computed(ranker.search("How much did I spend on books?"), "sum")["value"] == 42.5
    only_b1 = ranker.search("How much did I spend on books?", exclude_keys=["b2"])
    assert computed(only_b1, "sum")["value"] == 24.5


def test_a_sum_nothing_states_an_amount_for_computes_nothing(backend, ranker):
    ranker.set(*BOOKS)
    assert [c["kind"] for c in ranker.search("How much did I spend on skydiving?").json["computed"]] == []
