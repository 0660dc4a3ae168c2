"""eval.run, eval.run_get, eval.run_list: a set searched under two configurations through the same search() as
memory.search, its metrics exact, its progress and history readable, each org's its own."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from memories import inputs
from retrieval.store import clickhouse
from tenancy.models import ApiToken
from tests.model_server import Answer

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

MEMORIES = [
    {"memory_key": "deploy", "value": "production deploys run on tuesday mornings"},
    {"memory_key": "food", "value": "the cafeteria serves soup on fridays"},
    {"memory_key": "desk", "value": "hot desks are booked through the portal"},
    {"memory_key": "soup", "value": "the soup of the day is tomato on fridays"},
]
QUESTIONS = [
    {"id": "deploys", "question": "when do production deploys run", "gold_keys": ["deploy"], "category": "ops"},
    {"id": "soup", "question": "which soup is served on fridays", "gold_keys": ["soup", "food"], "category": "food"},
    {"id": "desks", "question": "how are hot desks booked", "gold_keys": ["desk"], "category": "ops"},
    {"id": "physics", "question": "quantum chromodynamics lecture", "should_abstain": True},
]
CONFIGS = [{"name": "wide"}, {"name": "one", "top_k": 1}]


def finished(call, token, run_id, namespace="default", seconds=60.0) -> dict:
    """eval.run_get of the run, polled until it is no longer running."""
    deadline = time.monotonic() + seconds
    while True:
        reply = call("eval.run_get", {"namespace": namespace, "run_id": run_id}, token)
        assert reply.status == 200, reply.json
        if reply.json["status"] != "running" or time.monotonic() > deadline:
            return reply.json
        time.sleep(0.05)


def load_faq(agent):
    """The memories, and the question set faq over them."""
    agent.set(*MEMORIES)
    reply = agent.call("eval.set_upload", {"set_name": "faq", "questions": QUESTIONS}, agent.token)
    assert reply.status == 201, reply.json
    return agent


@pytest.fixture
def loaded(backend, agent):
    return load_faq(agent)


def by_hand(served: dict[str, list[str]], abstained: dict[str, bool]) -> dict:
    """The metrics written out for this set: answerable deploys, soup, desks; physics should abstain."""
    gold = {q["id"]: q["gold_keys"] for q in QUESTIONS if not q.get("should_abstain")}

    def recall(qid, k):
        return len(set(gold[qid]) & set(served[qid][:k])) / len(gold[qid])

    def rr(qid):
        return next((1 / rank for rank, key in enumerate(served[qid], 1) if key in gold[qid]), 0.0)

    return {
        **{f"recall@{k}": sum(recall(qid, k) for qid in gold) / 3 for k in (1, 5, 10, 20)},
        "mrr": sum(rr(qid) for qid in gold) / 3,
        "hit@1": sum(recall(qid, 1) > 0 for qid in gold) / 3,
        "abstain_rate": float(abstained["physics"]),
        "false_abstain": sum(abstained[qid] for qid in gold) / 3,
    }


def test_two_configurations_measured_exactly_as_memory_search_answers(loaded):
    agent = loaded
    reply = agent.call("eval.run", {"set_name": "faq", "configs": CONFIGS}, agent.token)
    assert reply.status == 202, reply.json
    assert (reply.json["status"], reply.json["total"], reply.json["set_version"]) == ("running", 8, 1)
    report = finished(agent.call, agent.token, reply.json["run_id"])
    assert report["status"] == "done", report["error"]
    assert report["progress"] == {"done": 8, "total": 8}
    for config in CONFIGS:
        fields = {key: value for key, value in config.items() if key != "name"}
        answers = {
            q["id"]: agent.search(q["question"], **{"top_k": 20, **fields}).json for q in QUESTIONS
        }  # what REST answers the same questions
        served = {qid: [hit["memory_key"] for hit in answer["hits"]] for qid, answer in answers.items()}
        abstained = {qid: answer["abstain"] for qid, answer in answers.items()}
        expected = by_hand(served, abstained)
        measured = report["results"][config["name"]]["metrics"]
        assert {name: measured[name] for name in expected} == pytest.approx(expected)
        assert report["summary"][config["name"]]["metrics"] == measured
    wide, one = report["results"]["wide"]["metrics"], report["results"]["one"]["metrics"]
    assert wide["recall@1"] == one["recall@1"] == 2.5 / 3  # each first hit right; soup holds one of its two
    assert wide["recall@10"] == 1.0 and one["recall@10"] == 2.5 / 3
    ops = report["results"]["wide"]["by_category"]["ops"]
    assert {name: value for name, value in ops.items() if name != "intervals"} == {
        "questions": 2,
        "recall@10": 1.0,
        "hit@10": 1.0,
        "mrr": 1.0,
        "abstain_rate": None,
        "false_abstain": 0.0,
    }
    assert ops["intervals"]["recall@10"] == [1.0, 1.0] and ops["intervals"]["abstain_rate"] is None
    compared = report["wins_losses"]
    assert (compared["a"], compared["b"], compared["wins"], compared["losses"]) == ("wide", "one", 0, 1)
    assert [row["question_id"] for row in compared["rows"]] == ["soup"]
    assert report["results"]["wide"]["latency_ms"]["p50"] > 0


def test_the_latest_run_and_the_history(loaded):
    agent = loaded
    first = agent.call("eval.run", {"set_name": "faq"}, agent.token).json
    finished(agent.call, agent.token, first["run_id"])
    second = agent.call("eval.run", {"set_name": "faq", "configs": CONFIGS[1:]}, agent.token).json
    finished(agent.call, agent.token, second["run_id"])
    latest = agent.call("eval.run_get", {"set_name": "faq"}, agent.token).json
    assert latest["run_id"] == second["run_id"] and list(latest["results"]) == ["one"]
    assert latest["wins_losses"] is None  # one configuration: nothing to compare
    listed = agent.call("eval.run_list", {"limit": 1}, agent.token).json
    assert [run["run_id"] for run in listed["runs"]] == [second["run_id"]]
    older = agent.call("eval.run_list", {"limit": 1, "before": listed["next_before"]}, agent.token).json
    assert [run["run_id"] for run in older["runs"]] == [first["run_id"]] and older["next_before"] is None
    assert older["runs"][0]["configs"] == [{"name": "default"}]
    assert older["runs"][0]["summary"]["default"]["metrics"]["recall@10"] == 1.0


def test_refusals_name_what_is_missing(loaded):
    agent = loaded
    reply = agent.call("eval.run", {"set_name": "nope"}, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (404, "EVAL_SET_NOT_FOUND", "set_name")
    reply = agent.call("eval.run_get", {"run_id": "20260101T000000-0000"}, agent.token)
    assert (reply.status, reply.error) == (404, "EVAL_RUN_NOT_FOUND")
    reply = agent.call("eval.run", {"set_name": "faq", "configs": [{"name": "x", "query": "y"}]}, agent.token)
    assert (reply.error, reply.json["error"]["field"]) == ("UNKNOWN_FIELD", "configs[0].query")
    run = agent.call("eval.run", {"set_name": "faq", "configs": CONFIGS}, agent.token).json
    finished(agent.call, agent.token, run["run_id"])
    reply = agent.call("eval.run_get", {"run_id": run["run_id"], "a": "wide", "b": "narrow"}, agent.token)
    assert (reply.error, reply.json["error"]["field"]) == ("INVALID_VALUE", "b")


def test_viewers_read_admins_run_and_each_org_sees_its_own(loaded, bob, alice):
    agent = loaded
    run = agent.call("eval.run", {"set_name": "faq"}, agent.token).json
    finished(agent.call, agent.token, run["run_id"])
    viewer = alice.token("viewer")
    assert agent.call("eval.run_get", {"run_id": run["run_id"]}, viewer).status == 200
    assert agent.call("eval.set_list", {}, viewer).json["sets"][0]["set_name"] == "faq"
    assert agent.call("eval.run", {"set_name": "faq"}, viewer).error == "ROLE_FORBIDDEN"
    assert agent.call("eval.run", {"set_name": "faq"}, alice.token("writer")).error == "ROLE_FORBIDDEN"
    other = bob.token("admin")
    assert agent.call("eval.run_get", {"run_id": run["run_id"]}, other).error == "EVAL_RUN_NOT_FOUND"
    assert agent.call("eval.run_list", {}, other).json["runs"] == []
    assert agent.call("eval.set_list", {}, other).json["sets"] == []
    assert agent.call("eval.run", {"set_name": "faq"}, other).error == "EVAL_SET_NOT_FOUND"
    narrow = alice.token("admin", namespaces=["other"])
    assert agent.call("eval.run_get", {"run_id": run["run_id"]}, narrow).error == "NAMESPACE_FORBIDDEN"


def test_a_run_whose_process_ended_reads_as_failed(loaded):
    org = ApiToken.verify(loaded.token).org.name
    then = datetime.now(UTC) - timedelta(minutes=11)
    row = {"org": org, "namespace": "default", "run_id": "20261201T000000000000-dead", "set_name": "faq"}
    row |= {"set_version": 1, "configs": '[{"name": "default"}]', "total": 4, "status": "running", "error": ""}
    row |= {"started_from": "api", "started_by": "test", "started_at": then, "updated_at": then, "summary": ""}
    clickhouse.insert("eval_runs", [row])  # a run whose process died eleven minutes ago, mid-way
    report = loaded.call("eval.run_get", {"run_id": row["run_id"]}, loaded.token).json
    assert report["status"] == "failed" and "no progress for 0:10:00" in report["error"]


def test_uploads_and_runs_are_audited(loaded):
    run = loaded.call("eval.run", {"set_name": "faq", "configs": CONFIGS}, loaded.token).json
    finished(loaded.call, loaded.token, run["run_id"])
    entries = loaded.call("audit.list", {}, loaded.token).json["entries"]
    audited = {entry["action"]: entry for entry in entries if entry["action"].startswith("eval.")}
    assert audited["eval.set_upload"]["detail"] == {"set_name": "faq", "version": 1, "questions": 4}
    assert audited["eval.run"]["detail"] == {"run_id": run["run_id"], "set_name": "faq", "configs": CONFIGS}
    assert audited["eval.run"]["target"] == "default"


def test_wait_answers_once_done_for_a_set_small_enough(loaded, monkeypatch):
    reply = loaded.call("eval.run", {"set_name": "faq", "configs": CONFIGS, "wait": True}, loaded.token)
    assert reply.status == 200 and reply.json["status"] == "done"
    assert reply.json["summary"]["wide"]["metrics"]["recall@10"] == 1.0
    monkeypatch.setattr(inputs, "MAX_EVAL_WAIT", 7)
    reply = loaded.call("eval.run", {"set_name": "faq", "configs": CONFIGS, "wait": True}, loaded.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "INVALID_VALUE", "wait")
    assert "8 searches are too many to wait for (at most 7)" in reply.json["error"]["message"]


def test_a_failing_provider_is_each_questions_error_not_the_runs(backend, openai_embedder, model_server, agent):
    agent.call("eval.set_upload", {"set_name": "faq", "questions": QUESTIONS}, agent.token)
    model_server.script(*[Answer(401)] * len(QUESTIONS))
    reply = agent.call("eval.run", {"set_name": "faq", "wait": True}, agent.token)
    assert reply.status == 200 and reply.json["status"] == "done"
    summary = reply.json["summary"]["default"]
    assert summary["errors"] == 4 and summary["metrics"]["recall@10"] == 0.0
    rows = agent.call("eval.run_get", {"run_id": reply.json["run_id"]}, agent.token).json
    assert rows["progress"] == {"done": 4, "total": 4}


def test_two_runs_compared_question_by_question(loaded):
    before = loaded.call("eval.run", {"set_name": "faq", "configs": CONFIGS, "wait": True}, loaded.token).json
    loaded.call("memory.delete", {"memory_key": "desk"}, loaded.token)  # the answer to "desks" is gone
    after = loaded.call("eval.run", {"set_name": "faq", "configs": CONFIGS[:1], "wait": True}, loaded.token).json
    body = {"run_id": after["run_id"], "against": before["run_id"]}
    report = loaded.call("eval.run_get", body, loaded.token).json
    compared = report["wins_losses"]
    assert (compared["a"], compared["b"], compared["a_run_id"], compared["b_run_id"]) == (
        "wide",
        "wide",
        before["run_id"],
        after["run_id"],
    )
    assert (compared["wins"], compared["losses"]) == (0, 1) and compared["rows"][0]["question_id"] == "desks"
    assert report["against"]["results"]["wide"]["metrics"]["recall@10"] == 1.0
    assert report["results"]["wide"]["metrics"]["recall@10"] == pytest.approx(2 / 3)
    one = loaded.call("eval.run_get", {**body, "a": "one"}, loaded.token).json["wins_losses"]
    assert one["a"] == "one" and one["a_run_id"] == before["run_id"]
    loaded.call("eval.set_upload", {"set_name": "faq", "questions": QUESTIONS[:2]}, loaded.token)
    newer = loaded.call("eval.run", {"set_name": "faq", "wait": True}, loaded.token).json
    refused = loaded.call("eval.run_get", {"run_id": newer["run_id"], "against": before["run_id"]}, loaded.token)
    assert (refused.error, refused.json["error"]["field"]) == ("INVALID_VALUE", "against")
    assert "only runs of the same questions compare" in refused.json["error"]["message"]


def test_a_runs_searches_stay_out_of_the_trace_log(loaded, settings):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    loaded.search("when do production deploys run")  # a caller's search: logged
    assert loaded.call("eval.run", {"set_name": "faq", "wait": True}, loaded.token).json["status"] == "done"
    rows = loaded.call("memory.search_trace_log", {}, loaded.token).json["rows"]
    assert [row["op"] for row in rows] == ["memory.search"]  # the run's four searches are in its own results
