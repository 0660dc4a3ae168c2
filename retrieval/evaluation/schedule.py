"""Scheduled re-runs and the regressions they reveal.

With LOOM_EVAL_SCHEDULE (hourly, daily), each question set that has been run is run again once its latest run is
that old: its latest version, under the configurations of that run, as the org's searches. A configuration whose
recall@10 (or abstain rate) in a set's latest finished run falls below the 95% interval of the run before is a
regression: /v1/health names it to the org's admins and the Lab shows it on every page.

The worker runs in the embedded engine's server process (the one process that owns the data); on a ClickHouse
server, cron runs `manage.py loom_eval scheduled` (every app process would otherwise run the same sets).
"""

import json
import logging
import threading
from datetime import UTC, datetime, timedelta

from django.conf import settings

from retrieval.evaluation import runs
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)

INTERVALS = {"hourly": timedelta(hours=1), "daily": timedelta(days=1)}
CHECK_EVERY_S = 300  # how often the worker looks for due sets
WATCHED = {"recall@10": "recall@10", "abstain_rate": "abstain rate"}  # the metrics a drop of is a regression
ACTOR = "schedule"


def due(now: datetime | None = None) -> list[dict]:
    """The sets whose latest run is older than the schedule's interval (none while one runs): org, namespace,
    set_name and the configurations to run them under."""
    interval = INTERVALS.get(settings.LOOM_EVAL_SCHEDULE)
    if interval is None:
        return []
    rows = clickhouse.query(
        """
        SELECT org, namespace, set_name, argMax(configs, run_id) AS configs, max(started_at) AS last,
               countIf(status = 'running' AND updated_at > {stalled:DateTime64(3, 'UTC')}) AS running
        FROM eval_runs FINAL
        GROUP BY org, namespace, set_name
        """,
        {"stalled": datetime.now(UTC) - runs.STALLED_AFTER},
        every_org=True,  # the schedule runs every org's sets
    )
    now = now or datetime.now(UTC)
    return [
        {**row, "configs": json.loads(row["configs"])}
        for row in rows
        if not row["running"] and now - row["last"].replace(tzinfo=row["last"].tzinfo or UTC) >= interval
    ]


def run_due(now: datetime | None = None) -> int:
    """Run every due set now, one after another; returns how many ran."""
    ran = 0
    for found in due(now):
        scope = Scope(org=found["org"], namespace=found["namespace"], role=Role.ADMIN, subject=ACTOR)
        try:
            runs.start(scope, found["set_name"], found["configs"], started_from="schedule", wait=True)
            ran += 1
        except Exception:  # one set's failure (its questions gone, an outage) leaves the others to run
            log.exception("scheduled run of %s/%s %s failed", found["org"], found["namespace"], found["set_name"])
    return ran


def regressions(org: str) -> list[dict]:
    """Per namespace, set and configuration: a watched metric of the latest finished run below the previous
    finished run's 95% interval."""
    rows = clickhouse.query(
        """
        SELECT namespace, set_name, run_id, summary FROM eval_runs FINAL
        WHERE org = {org:String} AND status = 'done'
        ORDER BY namespace, set_name, run_id DESC
        LIMIT 2 BY namespace, set_name
        """,
        {"org": org},
    )
    latest: dict[tuple, list[dict]] = {}
    for row in rows:
        latest.setdefault((row["namespace"], row["set_name"]), []).append(
            {**row, "summary": json.loads(row["summary"] or "{}")}
        )
    found = []
    for (namespace, set_name), pair in latest.items():
        if len(pair) < 2:
            continue
        after, before = pair
        for config, result in after["summary"].items():
            earlier = before["summary"].get(config)
            for metric in WATCHED:
                if earlier is None or result["metrics"][metric] is None or earlier["intervals"][metric] is None:
                    continue
                low = earlier["intervals"][metric][0]
                if result["metrics"][metric] < low:
                    found.append(
                        {
                            "namespace": namespace,
                            "set_name": set_name,
                            "config": config,
                            "metric": metric,
                            "before": earlier["metrics"][metric],
                            "after": result["metrics"][metric],
                            "interval": earlier["intervals"][metric],
                            "run_id": after["run_id"],
                        }
                    )
    return found


def problems(org: str) -> dict[str, str]:
    """The org's regressions as health problems: code -> what it means."""
    return {
        f"eval_regression:{r['namespace']}/{r['set_name']}/{r['config']}/{r['metric']}": (
            f"{WATCHED[r['metric']]} of {r['config']} on question set {r['set_name']} ({r['namespace']}) fell from "
            f"{r['before']:.3f} to {r['after']:.3f}, below the previous run's 95% interval "
            f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] (run {r['run_id']})"
        )
        for r in regressions(org)
    }


class _Worker:
    def __init__(self, target: str):
        self.target, self.stop = target, threading.Event()
        self.thread = threading.Thread(target=self.run, name="loom-eval-schedule", daemon=True)

    def run(self) -> None:
        clickhouse.use_target_in_thread(self.target)
        try:
            while not self.stop.wait(CHECK_EVERY_S):
                try:
                    run_due()
                except Exception:  # the next check tries again
                    log.exception("scheduled evaluation check failed")
        finally:
            clickhouse.release_thread()


_worker: _Worker | None = None


def start_worker() -> bool:
    """Run the schedule in this process when LOOM_EVAL_SCHEDULE is set and the embedded engine serves."""
    global _worker
    if _worker is not None or settings.LOOM_EVAL_SCHEDULE == "off" or clickhouse.backend() != "embedded":
        return False
    _worker = _Worker(clickhouse.target())
    _worker.thread.start()
    return True
