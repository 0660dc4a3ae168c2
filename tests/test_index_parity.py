"""Each leg's SQL is the reference the in-process index answers to (retrieval/index): whatever a namespace's history
(rows over a small vocabulary, so words, names and dates repeat; some rewritten, some deleted, some duplicates the
write gates hide, some reflections) and whatever the question, a leg run over the index gives the rows, signals and
rank columns that its statement gives with the index off (LOOM_VECTOR_MIRROR=false: SQL alone); a filtered question
is left to the statement. A property per leg, on both backends; a change that makes the two disagree fails here, not
for a user. Compared by row, not in the leg's order: the pool is keyed and the ranking orders it, and two rows of one
value may get cosines an ulp apart (BLAS rounds by position), which would swap them with nothing lost."""

import uuid

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from retrieval import index
from retrieval.search import service
from retrieval.search.legs import bm25, entity, lexical, temporal, vector
from retrieval.search.plan import SearchRequest
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role
from tests.conftest import Agent
from tests.test_vector_mirror import agent_org, approx, wait_until

WORDS = ("deploy", "production", "tuesday", "backups", "nightly", "soup", "cafeteria", "audit", "standup", "freeze")
NAMES = ("Dana", "Acme", "Frankfurt")
DATES = ("2026-03-02T10:00:00Z", "2026-03-05T09:30:00Z", "2026-04-01T12:00:00Z")
ASKED_DATES = ("on 2 March 2026", "in March 2026", "on 1 April 2026")
LEGS = {
    "vector": vector.run,
    "lexical": lexical.run,
    "lexical_completion": lambda ctx: lexical.complete(ctx, [hit[0] for hit in vector.run(ctx)]),  # past the cut
    "bm25": bm25.run,
    "entity": entity.run,
    "temporal": temporal.run,
}
MODEL = "fake-ngram-384"

rows = st.fixed_dictionaries(
    {
        "key": st.integers(0, 7),
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        "name": st.none() | st.sampled_from(NAMES),
        "dated": st.none() | st.sampled_from(DATES),
        "reflection": st.sampled_from([False, False, False, True]),
    }
)
histories = st.fixed_dictionaries(
    {
        "written": st.lists(rows, min_size=1, max_size=10),
        "rewritten": st.lists(rows, max_size=3),
        "deleted": st.lists(st.integers(0, 7), max_size=2),
    }
)
questions = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.none() | st.sampled_from(NAMES),
    st.none() | st.sampled_from(ASKED_DATES),
    st.none() | st.sampled_from(NAMES),  # a filter: the rows naming this entity
)


def item(row: dict) -> dict:
    """A drawn row as memory.set takes it."""
    value = " ".join(row["words"]) + (f" with {row['name']}" if row["name"] else "")
    return {
        "memory_key": f"k{row['key']}",
        "value": value,
        "entities": [row["name"]] if row["name"] else [],
        **({"valid_at": row["dated"]} if row["dated"] else {}),
        **({"memory_type": "reflection"} if row["reflection"] else {}),
    }


def plain(answer):
    """Tuples as lists (the index keeps a row's lists as tuples, and ids are named tuples), floats within a unit of
    their sixth decimal (float32 sums in another order)."""
    if isinstance(answer, tuple | list):
        return [plain(part) for part in answer]
    if isinstance(answer, dict):
        return {name: plain(value) for name, value in answer.items()}
    return answer


def leg_answer(settings, scope: Scope, request: SearchRequest, leg: str, mirrored: bool) -> tuple[list, list[str]]:
    """The leg's hits for this request, with the index on or off, and the statements it ran."""
    settings.LOOM_VECTOR_MIRROR = mirrored
    ctx = service._prepare(scope, request, service._Clock()).ctx
    with clickhouse.recorded() as statements:
        found = LEGS[leg](ctx)
    return sorted(plain(found)), statements


@pytest.mark.parametrize("leg", LEGS)
@hypothesis_settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories, asked=st.lists(questions, min_size=1, max_size=3))
def test_a_leg_over_the_index_answers_as_its_sql(backend, agent, settings, leg, history, asked):
    namespace = f"p{uuid.uuid4().hex[:10]}"
    writer = Agent(agent.call, agent.token, namespace=namespace)
    writer.set(*[item(row) for row in history["written"]])
    if history["rewritten"]:
        writer.set(*[item(row) for row in history["rewritten"]])
    for key in history["deleted"]:
        agent.call("memory.delete", {"namespace": namespace, "memory_key": f"k{key}"}, agent.token)
    scope = Scope(org=agent_org(agent), namespace=namespace, role=Role.ADMIN, subject="test")
    index.get(scope.org, namespace, MODEL)  # its load begins
    wait_until(lambda: index.loaded(scope.org, namespace, MODEL))
    for words, name, when, only in asked:
        query = " ".join([*words, *([f"with {name}"] if name else []), *([when] if when else [])])
        filters = {"entity_filter": [only]} if only else {}
        request = SearchRequest(query=query, search_mode="hybrid", retrieval_budget="standard", top_k=10, **filters)
        reference, _ = leg_answer(settings, scope, request, leg, mirrored=False)
        answer, statements = leg_answer(settings, scope, request, leg, mirrored=True)
        assert answer == approx(reference), (query, filters)
        assert only or not statements, f"the index did not answer the {leg} leg: {statements}"


def test_what_the_index_hands_the_legs_is_read_through_its_doors_reader():
    """`index.get` and `index.peek` hand out a namespace's arrays; the legs and the write gates read them through
    `index.Reader`, which each of its reads must keep answering (a renamed read fails here, not in a leg)."""
    from retrieval.index import vectors

    held = vectors.Vectors(keyed=True)
    assert isinstance(held, index.Reader)
    assert held.size == 0
