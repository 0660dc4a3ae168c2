"""A conversation turn is embedded with the turn it answers: "We drove to the Grand Canyon" is found by
"where did they travel", which only its question says."""

from retrieval.ingest import embedding
from tests.conftest import Agent

QUESTION = "Caroline: Where did you travel last summer?"
ANSWER = "Melanie: We drove out with the kids, three days of hiking."
ASKED = "where did Melanie travel last summer"


def turn(key: str, value: str, session: str = "s1") -> dict:
    return {"memory_key": key, "value": value, "memory_type": "turn", "session_id": session}


def similarity(agent, key: str) -> float:
    hits = agent.search(ASKED, min_similarity=0, top_k=10).json["hits"]
    return next(hit["similarity"] for hit in hits if hit["memory_key"] == key)


def test_a_turn_leans_toward_the_turn_before_it(backend, agent, alice, call):
    agent.set(turn("t1", QUESTION), turn("t2", ANSWER))
    alone = Agent(call, agent.token, namespace="alone")
    alone.set(turn("t2", ANSWER))  # the first turn of its session: nothing before it
    assert similarity(agent, "t2") > similarity(alone, "t2") + 0.05


def test_the_turn_before_may_have_been_stored_earlier(backend, agent, call):
    agent.set(turn("t1", QUESTION))
    agent.set(turn("t2", ANSWER))
    together = Agent(call, agent.token, namespace="together")
    together.set(turn("t1", QUESTION), turn("t2", ANSWER))
    assert abs(similarity(agent, "t2") - similarity(together, "t2")) < 1e-5


def test_only_a_turn_of_the_same_session_is_its_context(backend):
    rows = [
        {"memory_key": "a1", "value": "first of a", "memory_type": "turn", "session_id": "a", "version": 1},
        {"memory_key": "b1", "value": "first of b", "memory_type": "turn", "session_id": "b", "version": 2},
        {"memory_key": "a2", "value": "second of a", "memory_type": "turn", "session_id": "a", "version": 3},
        {"memory_key": "f1", "value": "a fact", "memory_type": "fact", "session_id": "a", "version": 4},
        {"memory_key": "a3", "value": "third of a", "memory_type": "turn", "session_id": "a", "version": 5},
    ]
    assert embedding.turn_contexts("o", "n", rows[1:] + rows[:1]) == [None, "first of a", None, "second of a", None]
