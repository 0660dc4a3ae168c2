import getpass
import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from memories import inputs
from retrieval.errors import Refusal
from retrieval.evaluation import export, runs, schedule, sets
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.models import NAME_PATTERN, NAME_RULE, Org
from tenancy.roles import Role

METRICS = [
    ("R@1", "recall@1"),
    ("R@5", "recall@5"),
    ("R@10", "recall@10"),
    ("R@20", "recall@20"),
    ("MRR", "mrr"),
    ("hit@10", "hit@10"),
    ("abstain", "abstain_rate"),
    ("false ab", "false_abstain"),
]


class Command(BaseCommand):
    help = (
        "Evaluate a namespace's search on a labelled question set: upload a JSONL set, run it under configurations "
        "(the same search as memory.search), show a run as a table, JSON or CSV. With the embedded engine, run it "
        "while the server is stopped (or use the ops eval.set_upload and eval.run)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        for name, about in [
            ("upload", "store a JSONL file as the set's next version"),
            ("run", "search every question under each --config, with a progress bar, then show the result"),
            ("show", "show a run (default: the namespace's latest, of --set when given)"),
            ("list", "list the namespace's sets and runs"),
            ("scheduled", "run every org's sets that LOOM_EVAL_SCHEDULE says are due (cron, on a ClickHouse server)"),
        ]:
            action = sub.add_parser(name, help=about)
            if name == "scheduled":
                continue
            action.add_argument("--org", required=True)
            action.add_argument("--namespace", default="default")
            action.add_argument("--set", dest="set_name", required=name in ("upload", "run"))
            if name == "upload":
                action.add_argument("file", type=Path, help="JSONL: {question, gold_keys | should_abstain, ...}")
            if name == "run":
                action.add_argument("--version", type=int)
                action.add_argument(
                    "--config",
                    action="append",
                    dest="configs",
                    metavar="JSON",
                    help='a configuration, e.g. \'{"name": "semantic", "search_mode": "semantic"}\' (repeat for '
                    "more; default one named default that sets nothing)",
                )
            if name == "show":
                action.add_argument("--run", dest="run_id")
                action.add_argument("--against", metavar="RUN_ID", help="wins and losses against an earlier run")
            if name in ("run", "show"):
                action.add_argument("--format", choices=("table", "json", "csv"), default="table")
                action.add_argument("--compare", nargs=2, metavar=("A", "B"), help="wins and losses of B against A")

    def handle(self, *args, action, org=None, namespace=None, set_name=None, **options):
        if action == "scheduled":
            if settings.LOOM_EVAL_SCHEDULE == "off":
                raise CommandError("LOOM_EVAL_SCHEDULE is off: no set is ever due")
            self.stdout.write(f"{schedule.run_due()} question sets run")
            return
        if not Org.objects.filter(name=org).exists():
            raise CommandError(f"no org {org!r} (python manage.py loom_org list)")
        if not NAME_PATTERN.fullmatch(namespace):
            raise CommandError(f"namespace must be {NAME_RULE}")
        scope = Scope(org=org, namespace=namespace, role=Role.ADMIN, subject=f"cli:{getpass.getuser()}")
        try:
            getattr(self, action)(scope, set_name, **options)
        except (Refusal, clickhouse.ClickHouseUnavailable) as exc:
            raise CommandError(str(exc)) from None  # a refusal's message, or the outage's

    def upload(self, scope, set_name, file, **_):
        try:
            text = file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        uploaded = sets.upload(scope, set_name, inputs.eval_questions_from_jsonl(set_name, text))
        self.stdout.write(f"{set_name}: version {uploaded['version']}, {uploaded['questions']} questions")

    def run(self, scope, set_name, version, configs, format, compare, **_):
        body = {"set_name": set_name, "configs": [self._json(config) for config in configs or []] or None}
        run = inputs.checked(inputs.EvalRun, {key: value for key, value in body.items() if value is not None})
        checked = [dict(config) for config in run.get("configs") or [{"name": "default"}]]
        with tqdm(total=0, unit="search", file=sys.stderr, disable=None) as bar:

            def progress(done, total):
                bar.total = total
                bar.update(1)

            started = runs.start(scope, set_name, checked, version, "cli", wait=True, progress=progress)
        self._show(scope, started["run_id"], None, format, compare)

    def show(self, scope, set_name, run_id, format, compare, against, **_):
        self._show(scope, run_id, set_name, format, compare, against)

    def list(self, scope, set_name, **_):
        for found in sets.listed(scope):
            self.stdout.write(
                f"set {found['set_name']}: version {found['version']}, {found['questions']} questions "
                f"({found['should_abstain']} should abstain)"
            )
        for run in runs.listed(scope, set_name):
            best = ", ".join(
                f"{name} R@10 {_num(result['metrics']['recall@10'])}" for name, result in (run["summary"] or {}).items()
            )
            self.stdout.write(f"run {run['run_id']}: {run['set_name']} v{run['set_version']}, {run['status']}  {best}")

    def _json(self, text: str) -> dict:
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise CommandError(f"--config must be a JSON object: {exc}") from None
        if not isinstance(config, dict):
            raise CommandError("--config must be a JSON object")
        return config

    def _show(self, scope, run_id, set_name, format, compare, against=None):
        if format == "table":
            a, b = compare or (None, None)
            self.stdout.write(table(runs.report(scope, run_id, set_name, a, b, against)))
            return
        run_id = run_id or runs.get(scope, None, set_name)["run_id"]
        if format == "json":
            self.stdout.write(export.as_json(scope, run_id))
        else:
            self.stdout.write(export.as_csv(scope, run_id), ending="")


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(report: dict) -> str:
    """The report as text: a row per configuration, recall@10 per category, the wins and losses."""
    done = report["progress"]
    lines = [
        f"run {report['run_id']} of {report['set_name']} v{report['set_version']}: {report['status']}, "
        f"{done['done']}/{done['total']} searches" + (f" ({report['error']})" if report["error"] else ""),
        "",
        f"{'config':<16}" + "".join(f"{label:>9}" for label, _ in METRICS) + f"{'R@10 95% CI':>15}{'p50 ms':>9}"
        f"{'p95 ms':>9}{'cost $':>10}",
    ]
    for name, result in report["results"].items():
        low_high = result["intervals"]["recall@10"]
        ci = f"{low_high[0]:.3f}-{low_high[1]:.3f}" if low_high else "-"
        latency = result["latency_ms"]
        lines.append(
            f"{name:<16}"
            + "".join(f"{_num(result['metrics'][key]):>9}" for _, key in METRICS)
            + f"{ci:>15}{_ms(latency['p50']):>9}{_ms(latency['p95']):>9}{result['cost_usd']['total']:>10.4f}"
        )
    categories = sorted({c for result in report["results"].values() for c in result["by_category"]})
    if categories != [""]:
        lines += ["", "recall@10 per category", f"{'config':<16}" + "".join(f"{c or '(none)':>12}" for c in categories)]
        for name, result in report["results"].items():
            per = result["by_category"]
            lines.append(f"{name:<16}" + "".join(f"{_num(per.get(c, {}).get('recall@10')):>12}" for c in categories))
    compared = report["wins_losses"]
    if compared:
        lines += [
            "",
            f"{compared['b']} against {compared['a']}"
            + (f" of run {compared['a_run_id']}" if compared["a_run_id"] != compared["b_run_id"] else "")
            + f": {compared['wins']} wins, {compared['losses']} losses, "
            f"{compared['ties']} ties",
        ]
        for row in compared["rows"]:
            lines.append(
                f"  {row['verdict']:<5} {row['question_id']:<12} {_seen(row['a'])} -> {_seen(row['b'])}  "
                f"{row['question'][:70]}"
            )
    return "\n".join(lines)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _seen(seen: dict) -> str:
    rank = seen["first_gold_rank"]
    where = f"rank {rank}" if rank else "not found" if seen["recall@10"] is not None else "-"
    return where + (" (abstained)" if seen["abstain"] else "")
