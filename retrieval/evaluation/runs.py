"""Runs: every question of a set searched under each configuration, through the same `search()` as REST.

A run is a row in eval_runs (running, then done or failed, with its summary) and one eval_results row per
question and configuration, written as it goes, so a reader sees progress and partial metrics while it runs.
`start` runs it in a thread of this process (the API and the Lab answer at once and poll); `loom_eval` and the
schedule run it in their own thread with `wait`. A run whose process died stops being refreshed: after
STALLED_AFTER it reads as failed.
"""

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from retrieval.errors import Refusal
from retrieval.evaluation import metrics, sets
from retrieval.evaluation.metrics import Answer, Question
from retrieval.providers import costs, customer, remote
from retrieval.search import service
from retrieval.search.plan import SearchRequest
from retrieval.store import audit, clickhouse
from tenancy.access import Scope

log = logging.getLogger(__name__)

OP = "eval.run"  # the op its searches are metered as (they stay out of the search trace log)
DEFAULT_TOP_K = 20  # recall@20 needs twenty hits
BATCH = 25  # results written, and the run's row refreshed, every this many searches
STALLED_AFTER = timedelta(minutes=10)
_threads: set[threading.Thread] = set()  # the runs this process is running
# A provider's failure, as the refusal REST would answer it with; ClickHouse's fails the run.
_FAILURES = {
    remote.EmbedTimeout: "EMBED_TIMEOUT",
    remote.ProviderError: "EMBEDDER_UNAVAILABLE",
    remote.InputTooLong: "VALUE_TOO_LARGE",
}


def start(
    scope: Scope,
    set_name: str,
    configs: list[dict],
    version: int | None = None,
    started_from: str = "api",
    wait: bool = False,
    progress: Callable[[int, int], None] | None = None,
    wait_limit: int | None = None,
) -> dict:
    """Begin a run of the set under `configs` ([{"name", search fields...}]); returns its row. `wait`: run it in
    this thread and return its row once done (refused, naming `wait`, past `wait_limit` searches);
    `progress(done, total)` is told after each search."""
    version, questions = sets.questions(scope, set_name, version)
    configs = [{"name": config["name"], **{k: v for k, v in config.items() if k != "name"}} for config in configs]
    total = len(questions) * len(configs)
    if wait and wait_limit is not None and total > wait_limit:
        raise Refusal(
            "INVALID_VALUE",
            f"{total} searches are too many to wait for (at most {wait_limit}): send wait false and poll eval.run_get",
            "wait",
        )
    now = datetime.now(UTC)
    run = {
        "org": scope.org,
        "namespace": scope.namespace,
        "run_id": f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}",  # sorts by start time, to the microsecond
        "set_name": set_name,
        "set_version": version,
        "configs": json.dumps(configs),
        "total": total,
        "status": "running",
        "error": "",
        "started_from": started_from,
        "started_by": scope.subject,
        "started_at": now,
        "updated_at": now,
        "summary": "",
    }
    _save(run)
    if started_from != "schedule":  # a person's (or a token's) doing
        audit.record(
            scope.org,
            scope.subject,
            OP,
            scope.namespace,
            {"run_id": run["run_id"], "set_name": set_name, "configs": configs},
        )
    if wait:
        return _shown(_execute(scope, run, questions, progress))
    thread = threading.Thread(
        target=_in_thread, args=(clickhouse.target(), scope, run, questions), name="loom-eval", daemon=True
    )
    _threads.add(thread)
    thread.start()
    return _shown(run)


def join(timeout: float) -> None:
    """Wait for this process's runs to end (tests: none outlives the test that started it)."""
    deadline = time.monotonic() + timeout
    for thread in list(_threads):
        thread.join(max(0.0, deadline - time.monotonic()))


def _in_thread(target: str, scope: Scope, run: dict, questions: list[Question]) -> None:
    clickhouse.use_target_in_thread(target)
    try:
        _execute(scope, run, questions, None)
    finally:
        clickhouse.release_thread()
        _threads.discard(threading.current_thread())


def _execute(scope: Scope, run: dict, questions: list[Question], progress) -> dict:
    """Ask every question under each configuration, writing the answers as it goes; returns the run's last state."""
    answers: dict[str, list[Answer]] = {}  # kept for the summary: read back, they would be the same
    done, pending = 0, []
    try:
        for config in json.loads(run["configs"]):
            given = answers.setdefault(config["name"], [])
            for question in questions:
                given.append(_ask(scope, question, config, run["run_id"]))
                pending.append(_result(run, config["name"], question, given[-1]))
                done += 1
                if progress:
                    progress(done, run["total"])
                if len(pending) >= BATCH:
                    _write(run, pending)
        _write(run, pending)
        summary = {name: _summary(questions, given) for name, given in answers.items()}
        finished = {**run, "status": "done", "summary": json.dumps(summary)}
    except Exception as exc:  # the run is marked failed; its results so far stay readable
        log.exception("evaluation run %s failed", run["run_id"])
        finished = {**run, "status": "failed", "error": str(exc)[:500]}
    with contextlib.suppress(clickhouse.ClickHouseUnavailable):  # unsaved, it reads as failed once stalled
        _save(finished)
    return finished


def _summary(questions: list[Question], given: list[Answer]) -> dict:
    """One configuration's metrics over the questions it has answered so far, and per category."""
    asked = questions[: len(given)]
    return {**metrics.summarize(asked, given), "by_category": metrics.by_category(asked, given)}


def _ask(scope: Scope, question: Question, config: dict, run_id: str) -> Answer:
    """One question under one configuration, as REST would answer it; a refusal (or a provider's failure) is the
    answer's error, with the code REST would answer."""
    fields = {key: value for key, value in config.items() if key != "name"}
    request = SearchRequest(query=question.question, **{"top_k": DEFAULT_TOP_K, **fields})
    started = time.perf_counter()
    with costs.accounted(scope.org, scope.namespace, OP, scope.subject) as meter:
        try:
            result = service.search(scope, request, op=OP, run_id=run_id, logged=False)
        except (Refusal, customer.ModelCallRefused, *_FAILURES) as failed:  # the question's; the run goes on
            code = getattr(failed, "code", None) or next(c for kind, c in _FAILURES.items() if isinstance(failed, kind))
            return Answer((), False, "", (time.perf_counter() - started) * 1000, meter.cost_usd, code)
    keys = tuple(hit["memory_key"] for hit in result.hits)
    return Answer(keys, result.abstain, result.abstain_code or "", result.latency_ms, meter.cost_usd)


def _result(run: dict, config: str, question: Question, answer: Answer) -> dict:
    return {
        "org": run["org"],
        "namespace": run["namespace"],
        "run_id": run["run_id"],
        "config": config,
        "position": question.position,
        **asdict(answer),
    }


def _write(run: dict, pending: list[dict]) -> None:
    clickhouse.insert("eval_results", pending)
    pending.clear()
    _save(run)  # refreshed: a run that stops being refreshed has stalled


def _save(run: dict) -> None:
    clickhouse.insert("eval_runs", [{**run, "updated_at": datetime.now(UTC)}])


def _names(run: dict) -> list[str]:
    """The run's configurations' names, in order (of a run as `_shown` gives it)."""
    return [config["name"] for config in run["configs"]]


def _answers(scope: Scope, run_id: str) -> dict[str, list[Answer]]:
    """Each configuration's answers so far, in question order."""
    rows = clickhouse.query(
        """
        SELECT config, served_keys, abstain, abstain_code, latency_ms, cost_usd, error FROM eval_results
        WHERE org = {org:String} AND namespace = {namespace:String} AND run_id = {run_id:String}
        ORDER BY config, position
        """,
        {"org": scope.org, "namespace": scope.namespace, "run_id": run_id},
    )
    out: dict[str, list[Answer]] = {}
    for row in rows:
        config = row.pop("config")
        out.setdefault(config, []).append(Answer(**{**row, "served_keys": tuple(row["served_keys"])}))
    return out


_COLUMNS = "run_id, set_name, set_version, configs, total, status, error, started_from, started_by, started_at, updated_at, summary"


def listed(scope: Scope, set_name: str | None = None, limit: int = 50, before: str | None = None) -> list[dict]:
    """The namespace's runs, newest first (of one set, when named), each with its summary once done."""
    rows = clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM eval_runs FINAL
        WHERE org = {{org:String}} AND namespace = {{namespace:String}}
          AND ({{set_name:Nullable(String)}} IS NULL OR set_name = {{set_name:Nullable(String)}})
          AND ({{before:Nullable(String)}} IS NULL OR run_id < {{before:Nullable(String)}})
        ORDER BY run_id DESC LIMIT {{limit:UInt32}}
        """,
        {"org": scope.org, "namespace": scope.namespace, "set_name": set_name, "before": before, "limit": limit},
    )
    return [_shown(row) for row in rows]


def get(scope: Scope, run_id: str | None = None, set_name: str | None = None) -> dict:
    """One run (default: the namespace's latest, of `set_name` when given), its row as `listed` shows it."""
    if not run_id:
        rows = listed(scope, set_name, limit=1)
    else:
        found = clickhouse.query(
            f"""
            SELECT {_COLUMNS} FROM eval_runs FINAL
            WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND run_id = {{run_id:String}}
            """,
            {"org": scope.org, "namespace": scope.namespace, "run_id": run_id},
        )
        rows = [_shown(row) for row in found]
    if not rows:
        what = f"run {run_id!r}" if run_id else "evaluation run" + (f" of set {set_name!r}" if set_name else "")
        raise Refusal("EVAL_RUN_NOT_FOUND", f"no {what} in namespace {scope.namespace!r}", "run_id" if run_id else None)
    return rows[0]


def _shown(row: dict) -> dict:
    """A run row as readers see it: configs and summary parsed, a stalled run failed."""
    shown = {**row, "configs": json.loads(row["configs"]), "summary": json.loads(row["summary"] or "null")}
    shown.pop("org", None), shown.pop("namespace", None)
    if shown["status"] == "running" and datetime.now(UTC) - _aware(shown["updated_at"]) > STALLED_AFTER:
        shown.update(status="failed", error=f"no progress for {STALLED_AFTER} (its process ended?)")
    return shown


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def load(
    scope: Scope, run_id: str | None = None, set_name: str | None = None
) -> tuple[dict, list[Question], dict[str, list[Answer]]]:
    """A run (as `get` finds it), the questions it asked, and each configuration's answers so far."""
    run = get(scope, run_id, set_name)
    return run, sets.questions(scope, run["set_name"], run["set_version"])[1], _answers(scope, run["run_id"])


def report(
    scope: Scope,
    run_id: str | None = None,
    set_name: str | None = None,
    a: str | None = None,
    b: str | None = None,
    against: str | None = None,
) -> dict:
    """A run with its progress and, per configuration, its metrics (partial while it runs), per category, and
    the wins and losses of configuration `b` against `a`: both of this run (default its first two), or `a` of the
    run `against` (an earlier run of the same questions: default b's name there, else its first)."""
    return report_of(scope, *load(scope, run_id, set_name), a, b, against)


def report_of(
    scope: Scope,
    run: dict,
    questions: list[Question],
    answers: dict[str, list[Answer]],
    a: str | None = None,
    b: str | None = None,
    against: str | None = None,
) -> dict:
    """`report` of a run already loaded (`load`)."""
    out = {
        **run,
        "progress": {"done": sum(len(given) for given in answers.values()), "total": run["total"]},
        "results": _results(run, questions, answers),
        "against": None,
        "wins_losses": None,
    }
    names = _names(run)
    _check_name(b, names, "b")
    b = b or (names[0] if against else names[1] if len(names) > 1 else None)
    base, base_answers = run, answers
    if against:
        base = get(scope, against)
        if (base["set_name"], base["set_version"]) != (run["set_name"], run["set_version"]):
            raise Refusal(
                "INVALID_VALUE",
                f"run {against} asked {base['set_name']} version {base['set_version']}, not "
                f"{run['set_name']} version {run['set_version']}: only runs of the same questions compare",
                "against",
            )
        base_answers = _answers(scope, against)
        out["against"] = {**base, "results": _results(base, questions, base_answers)}
    base_names = _names(base)
    _check_name(a, base_names, "a")
    a = a or (b if against and b in base_names else base_names[0])
    if b is not None and len(base_answers.get(a, [])) == len(answers.get(b, [])) == len(questions):
        out["wins_losses"] = {
            "a": a,
            "b": b,
            "a_run_id": base["run_id"],
            "b_run_id": run["run_id"],
            **metrics.wins_losses(questions, base_answers[a], answers[b]),
        }
    return out


def _check_name(name: str | None, names: list[str], field: str) -> None:
    if name is not None and name not in names:
        raise Refusal("INVALID_VALUE", f"the run has no configuration {name!r} (it has {', '.join(names)})", field)


def _results(run: dict, questions: list[Question], answers: dict[str, list[Answer]]) -> dict:
    """Per configuration: the summary stored once the run was done, else the metrics of the answers so far."""
    stored = run["summary"] or {}
    return {name: stored.get(name) or _summary(questions, answers.get(name, [])) for name in _names(run)}


def answers_table(run: dict, questions: list[Question], answers: dict[str, list[Answer]]) -> list[dict]:
    """Every question with each configuration's answer (of a run as `load` gives it): the run's export."""
    rows = []
    for name in _names(run):
        for question, answer in zip(questions, answers.get(name, [])):
            rank = answer.first_rank(question.gold_keys) if question.gold_keys else None
            rows.append(
                {
                    "config": name,
                    "question_id": question.question_id,
                    "question": question.question,
                    "category": question.category,
                    "should_abstain": question.should_abstain,
                    "gold_keys": list(question.gold_keys),
                    "served_keys": list(answer.served_keys),
                    "first_gold_rank": rank,
                    "recall@10": answer.recall(question.gold_keys, 10) if question.gold_keys else None,
                    "abstain": answer.abstain,
                    "abstain_code": answer.abstain_code,
                    "latency_ms": round(answer.latency_ms, 2),
                    "cost_usd": answer.cost_usd,
                    "error": answer.error,
                }
            )
    return rows
