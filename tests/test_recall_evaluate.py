"""The Lab's Evaluate pages: upload a JSONL set, run it under configurations, read the run (progress, metrics,
wins and losses, exports); viewers read, admins upload and run; each org its own."""

import csv
import io
import json
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from retrieval.evaluation import runs, sets
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role
from tests.conftest import Agent
from tests.test_eval_run import MEMORIES, QUESTIONS
from tests.test_recall_lab import operator_of

JSONL = "\n".join(json.dumps(q) for q in QUESTIONS).encode()


@pytest.fixture
def stored(backend, alice, call):
    Agent(call, alice.token("admin")).set(*MEMORIES)
    return alice


def upload(client, name="faq", body=JSONL):
    return client.post(
        "/recall/evaluate",
        {"action": "upload", "namespace": "default", "set_name": name, "file": SimpleUploadedFile("q.jsonl", body)},
    )


def start(client, *configs):
    fields = {"action": "run", "namespace": "default", "set_name": "faq"}
    for i, config in enumerate(configs):
        fields.update({f"c{i}_{name}": value for name, value in config.items()})
    return client.post("/recall/evaluate", fields)


def test_upload_run_and_read_the_run(stored):
    admin = operator_of(stored, role="admin")
    page = upload(admin).content.decode()
    assert "Uploaded faq version 1: 4 questions." in page
    started = start(admin, {"name": "wide"}, {"name": "one", "top_k": "1"})
    assert started.status_code == 302 and started["Location"].startswith("/recall/evaluate/")
    runs.join(timeout=60)
    page = admin.get(started["Location"]).content.decode()
    assert "Done: 8 searches" in page and 'hx-trigger="every 1s"' not in page  # done: no more polling
    figure = json.loads(page.split('data-target="metrics-chart">')[1].split("</script>")[0])
    assert [bar["name"] for bar in figure["data"]] == ["wide", "one"]
    assert figure["data"][0]["x"][2] == "recall@10" and figure["data"][1]["y"][2] == pytest.approx(2.5 / 3)
    assert "one against wide: 0 wins, 1 loss, 3 ties" in page
    table = page.split('id="wins-losses"')[1]
    assert "which soup is served on fridays" in table
    assert "gold at 1 · recall@10 1.00" in table and "gold at 1 · recall@10 0.50" in table
    assert "/recall/compare?org=" in table and "query=which+soup+is+served+on+fridays" in table
    listing = admin.get("/recall/evaluate", {"namespace": "default"}).content.decode()
    assert "wide 1.000 · one 0.833" in listing
    history = json.loads(listing.split('data-target="history-chart">')[1].split("</script>")[0])
    assert {line["name"] for line in history["data"]} == {"wide", "one"}


def test_a_running_run_polls_for_its_progress(stored):
    admin = operator_of(stored, role="admin")
    upload(admin)
    now = datetime.now(UTC)
    running = {  # a run under way in another process
        **{"org": stored.name, "namespace": "default", "run_id": "20261201T000000-feed", "set_name": "faq"},
        **{"set_version": 1, "configs": '[{"name": "default"}]', "total": 4, "status": "running", "error": ""},
        **{"started_from": "api", "started_by": "test", "started_at": now, "updated_at": now, "summary": ""},
    }
    clickhouse.insert("eval_runs", [running])
    polled = admin.get("/recall/evaluate/20261201T000000-feed", {"namespace": "default"}, HTTP_HX_REQUEST="true")
    page = polled.content.decode()
    assert page.lstrip().startswith('<section id="eval-run"') and 'hx-trigger="every 1s"' in page
    assert "Searching: 0 of 4" in page
    clickhouse.insert("eval_runs", [{**running, "status": "done", "updated_at": datetime.now(UTC)}])
    page = admin.get("/recall/evaluate/20261201T000000-feed", {"namespace": "default"}).content.decode()
    assert "hx-trigger" not in page.split('id="eval-run"')[1].split(">")[0]  # done: the polling stops


def test_exports(stored):
    admin = operator_of(stored, role="admin")
    upload(admin)
    run_id = start(admin, {"name": "default"})["Location"].split("/")[-1].split("?")[0]
    runs.join(timeout=60)
    exported = admin.get(f"/recall/evaluate/{run_id}.csv", {"namespace": "default"})
    assert exported["Content-Disposition"] == f'attachment; filename="eval-{run_id}.csv"'
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [row["question_id"] for row in rows] == ["deploys", "soup", "desks", "physics"]
    document = json.loads(admin.get(f"/recall/evaluate/{run_id}.json", {"namespace": "default"}).content)
    assert document["run_id"] == run_id and len(document["answers"]) == 4
    assert admin.get("/recall/evaluate/nope.csv", {"namespace": "default"}).status_code == 404


def test_bad_uploads_and_runs_say_what_is_wrong(stored):
    admin = operator_of(stored, role="admin")
    bad = upload(admin, body=JSONL + b'\n{"question": "who?"}')
    assert bad.status_code == 422 and "line 5: gold_keys: name the keys that answer it" in bad.content.decode()
    assert "No question set yet" in bad.content.decode()
    upload(admin)
    again = upload(admin, body=b"{not json")
    assert again.status_code == 422 and "line 1 is not valid JSON" in again.content.decode()
    assert '<th scope="row">faq</th>' in again.content.decode()  # the sets still listed below the refusal
    refused = start(admin, {"name": "x", "top_k": "lots"})
    assert refused.status_code == 422 and "configs[0].top_k" in refused.content.decode()


def test_viewers_read_but_do_not_upload_or_run_and_orgs_stay_apart(stored, bob):
    admin = operator_of(stored, role="admin")
    upload(admin)
    run_id = start(admin, {"name": "default"})["Location"].split("/")[-1].split("?")[0]
    runs.join(timeout=60)
    viewer = operator_of(stored)
    page = viewer.get("/recall/evaluate").content.decode()
    assert "faq" in page and "Upload a set" not in page and "Run faq" not in page
    assert viewer.get(f"/recall/evaluate/{run_id}", {"namespace": "default"}).status_code == 200
    assert upload(viewer).status_code == 403 and start(viewer, {"name": "x"}).status_code == 403
    other = operator_of(bob, role="admin")
    assert "No question set yet" in other.get("/recall/evaluate").content.decode()
    assert "EVAL_RUN_NOT_FOUND" in other.get(f"/recall/evaluate/{run_id}").content.decode()
    assert other.get(f"/recall/evaluate/{run_id}.json").status_code == 404


def test_a_logged_search_joins_a_question_set_with_the_keys_marked_right(stored, settings, call):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    agent = Agent(call, stored.token("admin"))
    agent.call("namespace.register", {"namespace": "default", "text_capture": True}, agent.token)
    agent.search("when do production deploys run")
    agent.search("quantum chromodynamics lecture")
    logged = agent.call("memory.search_trace_log", {}, agent.token).json["rows"]
    deploys, physics = (
        next(row for row in logged if row["query"] == q)
        for q in ("when do production deploys run", "quantum chromodynamics lecture")
    )
    admin = operator_of(stored, role="admin")
    detail = admin.get(f"/recall/traces/{deploys['trace_id']}", {"namespace": "default"}).content.decode()
    assert "Add this question to a question set" in detail and 'value="deploy"' in detail

    def add(row, **fields):
        body = {"namespace": "default", "trace_id": row["trace_id"], "set_name": "from-traces", **fields}
        return admin.post("/recall/evaluate/from-trace", body)

    assert "version 1, 1 question." in add(deploys, gold_keys=["deploy", "not-served"]).content.decode()
    assert "version 2, 2 questions." in add(physics, should_abstain="true").content.decode()
    scope = Scope(org=stored.name, namespace="default", role=Role.ADMIN, subject="test")
    _, questions = sets.questions(scope, "from-traces")
    assert [(q.question, q.gold_keys, q.should_abstain) for q in questions] == [
        ("when do production deploys run", ("deploy",), False),  # only a key the search served
        ("quantum chromodynamics lecture", (), True),
    ]
    again = add(deploys, should_abstain="true")  # the same question again: relabelled in its place, not added twice
    assert "version 3, 2 questions." in again.content.decode()
    _, relabelled = sets.questions(scope, "from-traces")
    assert [(q.question, q.should_abstain) for q in relabelled] == [
        ("when do production deploys run", True),
        ("quantum chromodynamics lecture", True),
    ]
    neither = add(deploys, set_name="other")
    assert neither.status_code == 422 and "name the keys that answer it" in neither.content.decode()
    viewer = operator_of(stored)
    assert (
        "Add this question"
        not in viewer.get(f"/recall/traces/{deploys['trace_id']}", {"namespace": "default"}).content.decode()
    )
    assert (
        viewer.post(
            "/recall/evaluate/from-trace", {"namespace": "default", "trace_id": deploys["trace_id"]}
        ).status_code
        == 403
    )


def test_a_run_compared_with_an_earlier_one(stored, call):
    admin = operator_of(stored, role="admin")
    upload(admin)
    first = start(admin, {"name": "wide"})["Location"].split("/")[-1].split("?")[0]
    runs.join(timeout=60)
    Agent(call, stored.token("admin")).call("memory.delete", {"memory_key": "desk"}, stored.token("admin"))
    second = start(admin, {"name": "wide"})["Location"].split("/")[-1].split("?")[0]
    runs.join(timeout=60)
    page = admin.get(f"/recall/evaluate/{second}", {"namespace": "default"}).content.decode()
    assert f'<option value="{first}">' in page  # the earlier run of the same questions, to compare against
    page = admin.get(f"/recall/evaluate/{second}", {"namespace": "default", "against": first}).content.decode()
    assert f"wide against wide of run {first}: 0 wins, 1 loss, 3 ties" in page
    assert 'id="metrics-against"' in page and "how are hot desks booked" in page.split('id="wins-losses"')[1]


@pytest.mark.cluster  # the trace log joined with memory_usage, on a two-shard cluster too
def test_searches_rated_by_memory_outcome_become_a_question_set(backend, alice, settings, call):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    agent = Agent(call, alice.token("admin"))
    agent.call("namespace.register", {"namespace": "default", "text_capture": True}, agent.token)
    agent.set(  # an agent's runs, each searching its own run's memories
        {"memory_key": "deploy", "value": "production deploys run on tuesday mornings", "run_id": "chat-1"},
        {"memory_key": "soup", "value": "the soup of the day is tomato on fridays", "run_id": "chat-2"},
        {"memory_key": "desk", "value": "hot desks are booked through the portal", "run_id": "chat-3"},
    )
    agent.search("when do production deploys run", run_id="chat-1")
    agent.search("which soup is served on fridays", run_id="chat-2")
    agent.search("how are hot desks booked", run_id="chat-3")  # rated harm: not a label
    agent.search("where are hot desks booked")  # in no run, and its outcome names no search: no label
    served = agent.search("how do I book a hot desk").json  # in no run: rated by its trace_id
    for keys, outcome, run in ((["deploy"], "positive", "chat-1"), (["soup", "deploy"], "positive", "chat-2")):
        agent.call("memory.outcome", {"memory_keys": keys, "outcome": outcome, "run_id": run}, agent.token)
    agent.call("memory.outcome", {"memory_keys": ["desk"], "outcome": "harm", "run_id": "chat-3"}, agent.token)
    agent.call("memory.outcome", {"memory_keys": ["desk"], "outcome": "positive"}, agent.token)
    rated = {"memory_keys": ["desk"], "outcome": "positive", "trace_id": served["trace_id"]}
    assert agent.call("memory.outcome", rated, agent.token).status == 200
    admin = operator_of(alice, role="admin")
    body = {"action": "outcomes", "namespace": "default", "set_name": "rated"}
    page = admin.post("/recall/evaluate", body).content.decode()
    assert "Uploaded rated version 1: 3 questions (3 from outcomes)." in page
    _, questions = sets.questions(Scope(org=alice.name, namespace="default", role=Role.ADMIN, subject="t"), "rated")
    assert [(q.question, q.gold_keys) for q in questions] == [
        ("when do production deploys run", ("deploy",)),
        ("which soup is served on fridays", ("soup",)),  # deploy was rated too, but that search did not serve it
        ("how do I book a hot desk", ("desk",)),
    ]
    again = admin.post("/recall/evaluate", body)
    assert again.status_code == 422 and "no logged search to add" in again.content.decode()
