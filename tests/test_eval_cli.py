"""loom_eval: upload a JSONL set, run it under configurations with a progress bar, show, list and export."""

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenancy.models import ApiToken
from tests.test_eval_run import CONFIGS, MEMORIES, QUESTIONS


def loom_eval(*args) -> str:
    out, err = StringIO(), StringIO()
    call_command("loom_eval", *args, stdout=out, stderr=err)
    return out.getvalue()


@pytest.fixture
def org(backend, agent, tmp_path):
    agent.set(*MEMORIES)
    path = tmp_path / "faq.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n\n")
    name = ApiToken.verify(agent.token).org.name
    assert loom_eval("upload", "--org", name, "--set", "faq", str(path)) == "faq: version 1, 4 questions\n"
    return name


def test_run_prints_the_metrics_per_configuration_and_the_losses(org):
    configs = [arg for config in CONFIGS for arg in ("--config", json.dumps(config))]
    out = loom_eval("run", "--org", org, "--set", "faq", *configs)
    lines = out.splitlines()
    assert lines[0].startswith("run ") and lines[0].endswith("of faq v1: done, 8/8 searches")
    assert lines[2].split() == [
        "config", "R@1", "R@5", "R@10", "R@20", "MRR", "hit@10", "abstain", "false", "ab", "R@10", "95%", "CI",
        "p50", "ms", "p95", "ms", "cost", "$",
    ]  # fmt: skip
    wide, one = lines[3].split(), lines[4].split()
    assert wide[:5] == ["wide", "0.833", "1.000", "1.000", "1.000"]
    assert one[:5] == ["one", "0.833", "0.833", "0.833", "0.833"]
    assert "recall@10 per category" in out
    assert "one against wide: 0 wins, 1 losses, 3 ties" in out
    assert "  loss  soup         rank 1 -> rank 1  which soup is served on fridays" in out


def test_show_exports_json_and_csv_and_list_shows_the_history(org):
    loom_eval("run", "--org", org, "--set", "faq")
    exported = json.loads(loom_eval("show", "--org", org, "--format", "json"))
    assert exported["status"] == "done" and len(exported["answers"]) == 4
    assert exported["results"]["default"]["metrics"]["recall@10"] == 1.0
    rows = list(csv.DictReader(io.StringIO(loom_eval("show", "--org", org, "--set", "faq", "--format", "csv"))))
    assert [(row["question_id"], row["gold_keys"], row["first_gold_rank"]) for row in rows[:2]] == [
        ("deploys", "deploy", "1"),
        ("soup", "soup food", "1"),
    ]
    listed = loom_eval("list", "--org", org)
    assert "set faq: version 1, 4 questions (1 should abstain)" in listed
    assert f"run {exported['run_id']}: faq v1, done  default R@10 1.000" in listed


def test_clear_errors(org, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n\n" + json.dumps({"question": "who?"}) + "\n")
    with pytest.raises(CommandError, match=r"line 3: gold_keys: name the keys that answer it, or set should_abstain"):
        loom_eval("upload", "--org", org, "--set", "faq", str(bad))
    bad.write_text("{not json\n")
    with pytest.raises(CommandError, match="line 1 is not valid JSON"):
        loom_eval("upload", "--org", org, "--set", "faq", str(bad))
    with pytest.raises(CommandError, match="no question set 'nope'"):
        loom_eval("run", "--org", org, "--set", "nope")
    with pytest.raises(CommandError, match=r"configs\[0\].search_mode"):
        loom_eval("run", "--org", org, "--set", "faq", "--config", '{"name": "x", "search_mode": "psychic"}')
    with pytest.raises(CommandError, match="no org 'nobody'"):
        loom_eval("list", "--org", "nobody")


def test_show_against_an_earlier_run(org):
    first = json.loads(loom_eval("run", "--org", org, "--set", "faq", "--format", "json"))["run_id"]
    second = json.loads(loom_eval("run", "--org", org, "--set", "faq", "--format", "json"))["run_id"]
    out = loom_eval("show", "--org", org, "--run", second, "--against", first)
    assert f"default against default of run {first}: 0 wins, 0 losses, 4 ties" in out
