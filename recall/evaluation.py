"""The Lab's Evaluate pages: a namespace's question sets and runs (the ops eval.* do the same over REST).

Everyone in the org reads; admins upload a set (a JSONL file, checked as eval.set_upload checks its body) and start
runs (as eval.run: in the background; the run's page polls for its progress through htmx until it is done).
"""

import json
from datetime import UTC
from urllib.parse import urlencode

import plotly.graph_objects as go
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memories import inputs
from recall.views import CONFIG, errors_shown, member_page, namespace_scope, respond
from retrieval import options
from retrieval.errors import Refusal
from retrieval.evaluation import export, runs, sets
from retrieval.search import trace
from tenancy.access import Principal, authorize
from tenancy.roles import Role

SLOTS = 3  # configurations the run form offers (eval.run takes up to 4)
CONFIG_FIELDS = (*CONFIG, "top_k")  # what a slot sets, as the Lab and Compare name them
CHARTED = ("recall@1", "recall@5", "recall@10", "recall@20", "mrr", "hit@10", "abstain_rate", "false_abstain")


@member_page
@require_http_methods(["GET", "POST"])
def evaluate(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """The namespace's sets and runs, recall@10 over time; for admins, the upload and run forms (POST)."""
    data = request.POST if request.method == "POST" else request.GET
    form = {"namespace": data.get("namespace", ""), "set_name": data.get("set_name", "").strip()}
    admin = principal.role >= Role.ADMIN
    slots = [{"prefix": f"c{i}_", "config": slot} for i, slot in enumerate(_slots(data))]
    context.update(form=form, admin=admin, options=options, slots=slots)
    if request.method == "POST" and not admin:
        return render(request, "recall/forbidden.html", {"need": "an admin of this org"}, status=403)
    scope = None
    with errors_shown(context):
        scope = namespace_scope(principal, form, context)
        if request.method == "POST":
            admin_scope = authorize(principal, None, scope.namespace, Role.ADMIN)
            if data.get("action") == "run":
                started = runs.start(admin_scope, form["set_name"], _configs(data), started_from="lab")
                return redirect(_run_url(principal.org, scope.namespace, started["run_id"]))
            if data.get("action") == "outcomes":
                context["uploaded"] = _from_outcomes(admin_scope, form["set_name"])
            else:
                context["uploaded"] = _upload(admin_scope, form["set_name"], request.FILES.get("file"))
    status = 422 if "error" in context and request.method == "POST" else 200
    if scope is not None:
        with errors_shown(context):  # the sets and runs, below a refused form's message too
            listed = sets.listed(scope)
            form["set_name"] = form["set_name"] or (listed[0]["set_name"] if listed else "")
            history = runs.listed(scope, form["set_name"] or None, 50)
            context.update(scope=scope, sets=listed, runs=history, chart=json.dumps(_history_chart(history)))
    return render(request, "recall/evaluate.html", context, status=status)


@member_page
@require_POST
def from_trace(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """A logged search's question joins a question set with the served keys the operator marked as answering it
    (or as one memory cannot answer): the set's next version holds its questions so far and this one."""
    if principal.role < Role.ADMIN:
        return render(request, "recall/forbidden.html", {"need": "an admin of this org"}, status=403)
    data = request.POST
    with errors_shown(context):
        scope = authorize(principal, None, data.get("namespace", ""), Role.ADMIN)
        found = trace.read(scope, trace_id=data.get("trace_id", ""), limit=1)
        if not found or not found[0]["query_captured"]:
            raise Refusal("INVALID_VALUE", "no logged search with its question text has this trace_id", "trace_id")
        row, set_name = found[0], data.get("set_name", "").strip()
        question = {
            "id": f"trace-{row['trace_id']}",
            "question": row["query"],
            "gold_keys": [key for key in data.getlist("gold_keys") if key in row["keys"]],
            "should_abstain": data.get("should_abstain") == "true",
        }
        checked = inputs.eval_questions(set_name, [*sets.items(scope, set_name), question])
        context["added"] = sets.upload(scope, set_name, checked)
    return render(request, "recall/_from_trace.html", context, status=422 if "error" in context else 200)


def _from_outcomes(scope, set_name: str) -> dict:
    questions, added = sets.from_outcomes(scope, set_name)
    if not added:
        raise Refusal(
            "INVALID_VALUE",
            "no logged search to add: none that memory.outcome rated positive (with its question text kept) "
            "that the set does not hold",
            "set_name",
        )
    return {**sets.upload(scope, set_name, inputs.eval_questions(set_name, questions)), "added": added}


def _upload(scope, set_name: str, file) -> dict:
    if file is None:
        raise Refusal("MISSING_FIELD", "choose a JSONL file of questions", "file")
    try:
        text = file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("INVALID_VALUE", "the file must be UTF-8 text (JSONL)", "file") from None
    return sets.upload(scope, set_name, inputs.eval_questions_from_jsonl(set_name, text))


def _slots(data) -> list[dict]:
    """The run form's configurations as sent (the first named `default` when the form is new)."""
    slots = [{name: data.get(f"c{i}_{name}", "") for name in ("name", *CONFIG_FIELDS)} for i in range(SLOTS)]
    if not any(slot["name"] for slot in slots):
        slots[0]["name"] = "default"
    return slots


def _configs(data) -> list[dict]:
    """The named slots as eval.run's configs, checked as eval.run checks them (the field named: configs[1].top_k)."""
    configs = []
    for slot in _slots(data):
        if slot["name"].strip():
            config = {name: value.strip() for name, value in slot.items() if value.strip()}
            if "top_k" in config:
                config["top_k"] = int(config["top_k"]) if config["top_k"].isdigit() else config["top_k"]
            configs.append(config)
    run = inputs.checked(inputs.EvalRun, {"set_name": data.get("set_name", "").strip(), "configs": configs})
    return [dict(config) for config in run["configs"]]


def _run_url(org: str, namespace: str, run_id: str, **more) -> str:
    query = urlencode({"org": org, "namespace": namespace, **more})
    return f"{reverse('recall:eval_run', args=[run_id])}?{query}"


@member_page
@require_GET
def run_page(request: HttpRequest, principal: Principal, context: dict, run_id: str) -> HttpResponse:
    """One run: progress while it runs, then per configuration its metrics with 95% intervals (a chart and a
    table), per category, and the questions where `b` won or lost against `a`, each open in the Lab or Compare."""
    form = {"namespace": request.GET.get("namespace", "")}
    pair = {side: request.GET.get(side) or None for side in ("a", "b", "against")}
    with errors_shown(context):
        scope = namespace_scope(principal, form, context)
        report = runs.report(scope, run_id, **pair)
        configs = {config["name"]: config for config in report["configs"]}
        base = {config["name"]: config for config in (report["against"] or report)["configs"]}
        if report["wins_losses"]:
            for row in report["wins_losses"]["rows"]:
                row["links"] = _links(
                    principal.org, scope.namespace, row["question"], report["wins_losses"], base, configs
                )
        other_runs = [
            other
            for other in runs.listed(scope, report["set_name"], 50)
            if other["set_version"] == report["set_version"]
            and other["run_id"] != report["run_id"]
            and other["status"] == "done"
        ]
        context.update(
            scope=scope,
            report=report,
            names=list(configs),
            against_names=list(base),
            other_runs=other_runs,
            poll=_run_url(principal.org, scope.namespace, run_id, **{k: v for k, v in pair.items() if v}),
            chart=json.dumps(_metrics_chart(report["results"])),
            categories=sorted({c for result in report["results"].values() for c in result["by_category"]}),
        )
    return respond(request, "recall/_eval_run.html", "recall/eval_run.html", context)


def _links(org: str, namespace: str, question: str, compared: dict, base: dict, configs: dict) -> dict:
    """A question opened in the Lab under `b`'s configuration, and in Compare under `a` against `b` (a search
    today under both: an earlier run's answers may have come from other data)."""
    a, b = base[compared["a"]], configs[compared["b"]]
    shared = {"org": org, "namespace": namespace, "query": question}
    lab = {**shared, **{name: b[name] for name in CONFIG_FIELDS if name in b}}
    sides = {
        f"{side}_{name}": config[name] for side, config in (("a", a), ("b", b)) for name in CONFIG if name in config
    }
    return {
        "lab": f"{reverse('recall:lab')}?{urlencode(lab)}",
        "compare": f"{reverse('recall:compare')}?{urlencode({**shared, **sides})}",
    }


@member_page
@require_GET
def run_export(request: HttpRequest, principal: Principal, context: dict, run_id: str, fmt: str) -> HttpResponse:
    """The run as a file: JSON (the report and every answer) or CSV (a row per question per configuration)."""
    with errors_shown(context):
        scope = namespace_scope(principal, {"namespace": request.GET.get("namespace", "")}, context)
        body = export.as_json(scope, run_id) if fmt == "json" else export.as_csv(scope, run_id)
        response = HttpResponse(body, content_type="application/json" if fmt == "json" else "text/csv")
        response["Content-Disposition"] = f'attachment; filename="eval-{run_id}.{fmt}"'
        return response
    return render(request, "recall/_banner.html", context, status=refusal_status(context))


def refusal_status(context: dict) -> int:
    return 404 if context["error"]["code"].endswith("NOT_FOUND") else 422


def _metrics_chart(results: dict) -> dict:
    """Each configuration's metrics as grouped bars with their 95% intervals as error bars."""
    bars = []
    for name, result in results.items():
        means = [result["metrics"].get(metric) for metric in CHARTED]
        spans = [result["intervals"].get(metric) for metric in CHARTED]
        bars.append(
            go.Bar(
                name=name,
                x=list(CHARTED),
                y=means,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [span[1] - mean if span else 0 for span, mean in zip(spans, means)],
                    "arrayminus": [mean - span[0] if span else 0 for span, mean in zip(spans, means)],
                },
            )
        )
    figure = go.Figure(
        bars,
        layout={
            "barmode": "group",
            "height": 340,
            "margin": {"l": 40, "r": 10, "t": 40, "b": 40},
            "yaxis": {"range": [0, 1.05]},
            "legend": {"orientation": "h"},
            "title": {"text": "per configuration, with 95% bootstrap intervals"},
        },
    )
    return json.loads(figure.to_json())


def _history_chart(history: list[dict]) -> dict:
    """recall@10 of each configuration name over the runs that measured it, oldest first, with its interval: a drop
    after an embedder or setting change shows as a step down."""
    lines: dict[str, list[tuple[str, float, tuple]]] = {}
    for run in reversed(history):
        for name, result in (run["summary"] or {}).items():
            value = result["metrics"]["recall@10"]
            if value is not None:
                at = run["started_at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
                lines.setdefault(name, []).append((at, value, result["intervals"]["recall@10"]))
    figure = go.Figure(
        [
            go.Scatter(
                name=name,
                x=[at for at, _, _ in points],
                y=[value for _, value, _ in points],
                mode="lines+markers",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [high - value for _, value, (_, high) in points],
                    "arrayminus": [value - low for _, value, (low, _) in points],
                },
            )
            for name, points in lines.items()
        ],
        layout={
            "height": 300,
            "margin": {"l": 40, "r": 10, "t": 40, "b": 40},
            "xaxis": {"type": "date", "title": {"text": "UTC"}},
            "yaxis": {"range": [0, 1.05], "title": {"text": "recall@10"}},
            "legend": {"orientation": "h"},
            "title": {"text": "recall@10 over time, per configuration"},
        },
    )
    return json.loads(figure.to_json())
