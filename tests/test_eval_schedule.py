"""LOOM_EVAL_SCHEDULE re-runs evaluated sets once their latest run is as old as the schedule; a metric that falls
below the previous run's 95% interval is named in health (to the org's admins) and on every Lab page."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from retrieval.evaluation import schedule
from retrieval.store import clickhouse
from tenancy.models import ApiToken
from tests.conftest import Tenant
from tests.test_eval_run import CONFIGS, finished, load_faq
from tests.test_recall_lab import operator_of

pytestmark = pytest.mark.cluster  # the schedule's reads run on a two-shard cluster too


@pytest.fixture
def evaluated(backend, agent):
    load_faq(agent)
    run = agent.call("eval.run", {"set_name": "faq", "configs": CONFIGS}, agent.token).json
    assert finished(agent.call, agent.token, run["run_id"])["status"] == "done"
    return agent


def test_a_set_is_run_again_once_its_latest_run_is_as_old_as_the_schedule(evaluated, settings):
    settings.LOOM_EVAL_SCHEDULE = "daily"
    mine = lambda found: [f for f in found if f["set_name"] == "faq" and f["org"] == org_of(evaluated)]  # noqa: E731
    assert mine(schedule.due()) == []  # run a moment ago
    later = datetime.now(UTC) + timedelta(days=1, minutes=1)
    due = mine(schedule.due(later))
    assert [(found["namespace"], found["configs"]) for found in due] == [("default", CONFIGS)]
    settings.LOOM_EVAL_SCHEDULE = "off"
    assert schedule.due(later) == []
    settings.LOOM_EVAL_SCHEDULE = "daily"
    assert schedule.run_due(later) >= 1
    runs = evaluated.call("eval.run_list", {"set_name": "faq"}, evaluated.token).json["runs"]
    assert [(run["started_from"], run["status"]) for run in runs] == [("schedule", "done"), ("api", "done")]
    assert runs[0]["configs"] == CONFIGS and runs[0]["started_by"] == "schedule"


def test_a_drop_beyond_the_interval_is_a_health_problem_and_a_lab_banner(evaluated, alice, health):
    assert not [p for p in health()["problems"] if p.startswith("eval_regression")]
    evaluated.call("memory.delete", {"memory_key": "desk"}, evaluated.token)  # a gold memory lost
    run = evaluated.call("eval.run", {"set_name": "faq", "configs": CONFIGS}, evaluated.token).json
    finished(evaluated.call, evaluated.token, run["run_id"])
    problems = [p for p in health()["problems"] if p.startswith("eval_regression")]
    assert "eval_regression:default/faq/wide/recall@10" in problems
    page = operator_of(alice).get("/recall").content.decode()
    assert "recall@10 of wide on question set faq (default) fell from 1.000 to 0.667" in page
    assert not [p for p in _health_of_another_org(evaluated) if p.startswith("eval_regression")]


def _health_of_another_org(agent):
    other = Tenant("carol").token("admin")
    return agent.call("health", token=other, method="get").json["problems"]


def org_of(agent) -> str:
    return ApiToken.verify(agent.token).org.name


def test_the_command_runs_what_is_due(evaluated, settings):
    with pytest.raises(CommandError, match="LOOM_EVAL_SCHEDULE is off"):
        call_command("loom_eval", "scheduled", stdout=StringIO())
    settings.LOOM_EVAL_SCHEDULE = "daily"
    last = evaluated.call("eval.run_get", {"set_name": "faq"}, evaluated.token).json
    a_day_ago = datetime.now(UTC) - timedelta(days=1, minutes=1)
    row = {**last, "org": org_of(evaluated), "namespace": "default", "started_at": a_day_ago}
    now = datetime.now(UTC)  # a later state of the run, which FINAL keeps
    row |= {"updated_at": now, "configs": json.dumps(last["configs"]), "summary": json.dumps(last["summary"])}
    fields = ("org", "namespace", "run_id", "set_name", "set_version", "configs", "total", "status", "error")
    fields += ("started_from", "started_by", "started_at", "updated_at", "summary")
    clickhouse.insert("eval_runs", [{name: row[name] for name in fields}])  # the run, as if started a day ago
    out = StringIO()
    call_command("loom_eval", "scheduled", stdout=out)
    assert int(out.getvalue().split()[0]) >= 1 and out.getvalue().endswith("question sets run\n")
    runs = evaluated.call("eval.run_list", {"set_name": "faq"}, evaluated.token).json["runs"]
    assert [run["started_from"] for run in runs] == ["schedule", "api"]
