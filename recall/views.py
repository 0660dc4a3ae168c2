"""The Recall Lab: an operator runs the same `search()` the REST op runs and sees why each hit ranked where it did.

Every view reads the user's membership of one org (the one place that decides is
tenancy.access), so a page shows only that org's namespaces. A search is a GET, so
its URL is a shareable link; htmx swaps the results in and pushes that URL.
"""

import json
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps

import plotly.graph_objects as go
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods
from rest_framework.exceptions import ValidationError

from memories import inputs
from memories.errors import refusal_of
from recall.compare import moves
from retrieval import caching, health, options
from retrieval.errors import Refusal
from retrieval.evaluation import schedule
from retrieval.gates import calibration, thresholds
from retrieval.ingest.write import MEMORY_TYPES
from retrieval.providers import costs, customer, remote
from retrieval.providers.embedders import get_embedder
from retrieval.search import rank, service, trace
from retrieval.search.plan import SearchRequest
from retrieval.store import audit, clickhouse, conflict_decisions, extraction_queue, namespaces, reads
from tenancy import audit as audit_log
from tenancy.access import Principal, Scope, authorize
from tenancy.models import Membership, Org
from tenancy.roles import Role

# The form's fields, as memory.search names them; lists are typed comma-separated.
FIELDS = (
    "namespace",
    "query",
    "search_mode",
    "recipe",
    "retrieval_budget",
    "top_k",
    "rerank",
    "personalization",
    "memory_type",
    "tags",
    "entity_filter",
)
LISTS = ("tags", "entity_filter")
# What Compare lets differ between its two windows; the query, namespace and filters are shared.
CONFIG = ("search_mode", "recipe", "retrieval_budget", "rerank", "personalization")
LAB_OP = "recall.lab"  # how the trace log and the cost rows name a Lab search
TRACE_FILTERS = ("namespace", "since", "until", "op", "abstain", "risk", "before")
PAGE = 25  # rows per page of the trace log, the memories list and a conversation's turns


def memberships(request: HttpRequest) -> tuple[list[Membership], Membership | None]:
    """The user's orgs, and the one this page shows (`?org=`, else the first by name)."""
    found = list(Membership.objects.filter(user=request.user).select_related("org", "user").order_by("org__name"))
    wanted = request.GET.get("org")
    chosen = next((m for m in found if m.org.name == wanted), None) if wanted else (found[0] if found else None)
    return found, chosen


@contextmanager
def errors_shown(context: dict):
    """A refusal or an outage becomes the page's error banner (with the field at fault), never a Django error page."""
    try:
        yield
    except (Refusal, reads.BadCursor, clickhouse.ClickHouseUnavailable) as exc:
        context["error"] = refusal_of(exc).to_envelope()["error"]


def namespace_names(principal: Principal, context: dict) -> list[str]:
    """The org's namespaces, for the page's picker ("default" while it has none)."""
    context["namespaces"] = namespaces.names(principal.org) or ["default"]
    return context["namespaces"]


def _namespace_picked(principal: Principal, form: dict, context: dict) -> str:
    """The org's namespaces for the page's picker, and the one the page shows: the form's, else `default`, else the
    first. The form then names it, so the picker shows the namespace the page serves."""
    names = namespace_names(principal, context)
    form["namespace"] = form.get("namespace") or ("default" if "default" in names else names[0])
    return form["namespace"]


def namespace_scope(principal: Principal, form: dict, context: dict):
    return authorize(principal, None, _namespace_picked(principal, form, context), Role.VIEWER)


def respond(request: HttpRequest, partial: str, page: str, context: dict) -> HttpResponse:
    """An htmx request gets the partial it swaps in; any other the whole page (a pushed URL reloads whole)."""
    return render(request, partial if request.htmx else page, context)


def next_page(request: HttpRequest, scope: Scope, cursor: str | None) -> str | None:
    """This page's URL at the next cursor, its filters as asked and its org and namespace as served; None on the
    last page."""
    if not cursor:
        return None
    query = request.GET.copy()
    query["org"], query["namespace"], query["cursor"] = scope.org, scope.namespace, cursor
    return f"{request.path}?{query.urlencode()}"


def member_page(view):
    """A page of one org the user belongs to: the view gets that org's principal and the context every page
    starts from; a user of no such org gets the no-org page (403)."""

    @login_required
    @wraps(view)
    def page(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        orgs, membership = memberships(request)
        if membership is None:
            return render(request, "recall/no_org.html", {"orgs": orgs}, status=403)
        principal = Principal.of_membership(membership)
        context = {"orgs": orgs, "org": principal.org, "problems": {p: health.meaning(p) for p in health.problems()}}
        with errors_shown(context):  # the org's question sets' regressions; an outage is the page's to show
            context["problems"] |= schedule.problems(principal.org)
        return view(request, principal, context, *args, **kwargs)

    return page


@member_page
@require_GET
def lab(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    form = {name: request.GET.get(name, "") for name in FIELDS}
    context.update(form=form, options=options, searched=False)
    with errors_shown(context):
        _namespace_picked(principal, form, context)
        if form["query"].strip():
            context.update(searched=True, **_search(principal, form))
    return respond(request, "recall/_results.html", "recall/lab.html", context)


@member_page
@require_GET
def compare(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """The same query under two configurations, side by side: each row's rank move, rows only in one window,
    overlap@k and the rank correlation of the rows both served."""
    shared = {name: request.GET.get(name, "") for name in FIELDS if name not in CONFIG}
    context.update(form=shared, options=options, searched=False)
    with errors_shown(context):
        _namespace_picked(principal, shared, context)
        sides = {side: {**shared, **{name: request.GET.get(f"{side}_{name}", "") for name in CONFIG}} for side in "ab"}
        context.update(sides=sides)
        if shared["query"].strip():
            runs = {side: _search(principal, form) for side, form in sides.items()}
            context.update(searched=True, runs=runs, **moves(runs))
    return respond(request, "recall/_compare_results.html", "recall/compare.html", context)


def _admin_orgs(request: HttpRequest) -> list[str]:
    """The orgs whose model calls this user may switch: every org for staff, else those they administer."""
    if request.user.is_staff:
        return list(Org.objects.order_by("name").values_list("name", flat=True))
    return [m.org.name for m in memberships(request)[0] if m.role_enum >= Role.ADMIN]


@login_required
@require_http_methods(["GET", "POST"])
def orgs(request: HttpRequest) -> HttpResponse:
    """Every org the user administers, with its model-call switch, a toggle that asks a reason and a confirmation,
    and the audit trail. A POST switches one org (CSRF-checked) and answers that org's row."""
    allowed = _admin_orgs(request)
    if not allowed:
        return render(request, "recall/forbidden.html", {"need": "an org admin (or staff) account"}, status=403)
    if request.method == "POST":
        org, reason = request.POST.get("org", ""), request.POST.get("reason", "").strip()
        if org not in allowed:
            return render(request, "recall/forbidden.html", {"need": f"admin of org {org!r}"}, status=403)
        error = None if reason else "Say why: the reason goes into the audit trail."
        if not error:
            enabled = request.POST.get("enabled") == "true"
            customer.set_model_calls(org, enabled, reason, f"human:{request.user.get_username()}")
        row = {"org": org, **customer.get_model_calls(org, history=10), "error": error}
        return render(request, "recall/_org_row.html", {"row": row}, status=422 if error else 200)
    context = {"rows": [customer.get_model_calls(org, history=10) for org in allowed], "orgs": [], "org": None}
    return render(request, "recall/orgs.html", context)


@member_page
@require_GET
def audit_page(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """For the org's admins: its audit log, newest first (what audit.list answers)."""
    if principal.role < Role.ADMIN:
        return render(request, "recall/forbidden.html", {"need": "an admin of this org"}, status=403)
    context["entries"] = audit_log.entries(principal.org, AUDIT_PAGE)
    return render(request, "recall/audit.html", context)


AUDIT_PAGE = 200  # entries the page shows; audit.list pages further back


@member_page
@require_http_methods(["GET", "POST"])
def calibration_page(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """Per namespace the tier in force, every gate, the calibration's hash and age; the probe corpora's cosines
    with the derived gates drawn on them; for an admin, a button that recalibrates now (POST)."""
    embedder = get_embedder()
    context.update(
        admin=principal.role >= Role.ADMIN, adaptive=thresholds.adaptive(embedder.model_name), model=embedder.model_name
    )
    with errors_shown(context):
        if request.method == "POST":
            if not context["admin"]:
                return render(request, "recall/forbidden.html", {"need": "an admin of this org"}, status=403)
            if context["adaptive"]:
                context["recalibrated"] = calibration.recalibrate(embedder)[2]  # the largest gate drift
                caching.forget_all()
                audit.record(principal.org, f"human:{request.user.get_username()}", "recalibrate")
        reports = [thresholds.report(principal.org, name) for name in namespace_names(principal, context)]
        cluster = calibration.stored(embedder.model_name) if context["adaptive"] else None
        context.update(
            reports=reports, charts=_calibration_charts(reports), far=_far_gates(reports, cluster), far_by=FAR
        )
    return respond(request, "recall/_calibration.html", "recall/calibration.html", context)


FAR = 0.15  # a namespace's own gate this far from the model's calibration is worth a second look


def _far_gates(reports: list[dict], cluster) -> list[dict]:
    """The namespace-tier gates far from the embedder's own calibration: labelled pairs that do not represent the
    namespace's questions can put abstain where every search abstains, or where none does."""
    if cluster is None:
        return []
    return [
        {"namespace": report["namespace"], "gate": gate, "value": value, "cluster": cluster.gates[gate]}
        for report in reports
        if report["tier"] == "namespace"
        for gate, value in report["gates"].items()
        if gate in cluster.gates and abs(value - cluster.gates[gate]) >= FAR
    ]


def _calibration_charts(reports: list[dict]) -> list[dict]:
    """One histogram per calibration in force (namespaces sharing the cluster calibration share its chart)."""
    charts, seen = [], set()
    for report in reports:
        if not report["distributions"] or report["calibration_hash"] in seen:
            continue
        seen.add(report["calibration_hash"])
        figure = go.Figure(
            [
                go.Histogram(x=values, name=corpus, opacity=0.6, nbinsx=30)
                for corpus, values in report["distributions"].items()
            ],
            layout={
                "barmode": "overlay",
                "height": 320,
                "margin": {"l": 40, "r": 10, "t": 40, "b": 40},
                "xaxis": {"title": {"text": "cosine"}},
                "legend": {"orientation": "h"},
                "title": {"text": f"probe cosines · {report['tier']} {report['calibration_hash']}"},
            },
        )
        for index, (value, names) in enumerate(_coinciding(report["gates"])):
            figure.add_vline(
                x=value,
                line_dash="dot",
                annotation_text=" = ".join(names),
                annotation_textangle=-90,
                annotation_position="top right" if index % 2 == 0 else "bottom right",  # neighbours alternate
            )
        charts.append({"id": f"calibration-{report['calibration_hash']}", "figure": figure.to_json()})
    return charts


def _coinciding(gates: dict[str, float], within: float = 0.01) -> list[tuple[float, list[str]]]:
    """Gates by value, those within `within` of the one before sharing a line (and one label: "conflict = duplicate"
    rather than two labels drawn over each other)."""
    lines = []
    for name, value in sorted(gates.items(), key=lambda item: item[1]):
        if lines and value - lines[-1][2] < within:
            lines[-1][1].append(name)
            lines[-1][2] = value
        else:
            lines.append([value, [name], value])
    return [(value, names) for value, names, _ in lines]


@member_page
@require_GET
def traces(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """The namespace's search trace log, filtered and paged, with latency p50/p95 and the abstain rate over time."""
    form = {name: request.GET.get(name, "").strip() for name in TRACE_FILTERS}
    context.update(form=form, risks=("low", "medium", "high", "abstain"))
    with errors_shown(context):
        scope = namespace_scope(principal, form, context)
        filters = _trace_filters(form)
        rows, next_before = trace.page(scope, PAGE, form["before"] or None, **filters)
        context.update(
            scope=scope,
            rows=rows,
            next_before=next_before,
            chart=json.dumps(_trace_chart(trace.series(scope, **filters))),
        )
    return respond(request, "recall/_traces.html", "recall/traces.html", context)


@member_page
@require_GET
def trace_detail(request: HttpRequest, principal: Principal, context: dict, trace_id: str) -> HttpResponse:
    """One logged search: its keys, scores and stages, and (where the text was captured) a link that re-runs it."""
    with errors_shown(context):
        scope = namespace_scope(principal, {"namespace": request.GET.get("namespace", "")}, context)
        found = trace.read(scope, trace_id=trace_id, limit=1)
        if not found:
            return render(
                request, "recall/_banner.html", {"error": {"code": "NOT_FOUND", "message": "no such trace"}}, status=404
            )
        row = found[0]
        context.update(
            row=row,
            namespace=scope.namespace,
            hits=list(zip(row["keys"], row["scores"], row["similarities"])),
            admin=principal.role >= Role.ADMIN,  # may add the question to a question set
        )
    return render(request, "recall/_banner.html" if "error" in context else "recall/_trace_detail.html", context)


def _trace_filters(form: dict) -> dict:
    """The log's filters from the form; a bad one is refused (INVALID_VALUE, naming it)."""
    found = {
        "op": form["op"] or None,
        "risk": form["risk"] or None,
        "abstain": {"yes": True, "no": False}.get(form["abstain"]),
    }
    for name in ("since", "until"):
        try:
            moment = datetime.fromisoformat(form[name]) if form[name] else None
        except ValueError:
            raise Refusal("INVALID_VALUE", f"{name} must be a date and time, like 2026-11-29T14:00", name) from None
        found[name] = moment.replace(tzinfo=moment.tzinfo or UTC) if moment else None
    return found


def _trace_chart(points: list[dict]) -> dict:
    """Latency p50 and p95 over time, and the abstain rate on a second axis. Times go as plain UTC: plotly.js reads
    no zone offset, and took "…+00:00" for category labels (an axis of garbled strings over a short span)."""
    at = [point["at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") for point in points]
    figure = go.Figure(
        [
            go.Scatter(x=at, y=[p["p50"] for p in points], name="latency p50 (ms)", mode="lines+markers"),
            go.Scatter(x=at, y=[p["p95"] for p in points], name="latency p95 (ms)", mode="lines+markers"),
            go.Bar(x=at, y=[p["abstain_rate"] for p in points], name="abstain rate", yaxis="y2", opacity=0.35),
        ],
        layout={
            "height": 300,
            "margin": {"l": 50, "r": 50, "t": 30, "b": 40},
            "legend": {"orientation": "h"},
            "xaxis": {"type": "date", "title": {"text": "UTC"}},
            "yaxis": {"title": {"text": "ms"}},
            "yaxis2": {
                "overlaying": "y",
                "side": "right",
                "range": [0, 1],
                "dtick": 0.25,
                "tickformat": ".0%",
                "title": {"text": "abstain rate"},
            },
        },
    )
    return json.loads(figure.to_json())


@member_page
@require_GET
def memories(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """The namespace's keys, newest first or by confidence, filtered by type and key prefix, paged by cursor."""
    form = {
        name: request.GET.get(name, "").strip()
        for name in ("namespace", "order", "memory_type", "key_prefix", "cursor")
    }
    context.update(form=form, memory_types=MEMORY_TYPES)
    with errors_shown(context):
        scope = namespace_scope(principal, form, context)
        if form["order"] not in ("", "recent", "score"):
            raise Refusal("INVALID_VALUE", "order is recent or score", "order")
        page = reads.list_keys(
            scope,
            order=form["order"] or "recent",
            limit=PAGE,
            cursor=form["cursor"] or None,
            memory_type=form["memory_type"] or None,
            key_prefix=form["key_prefix"] or None,
        )
        context.update(scope=scope, items=page.items, next_page=next_page(request, scope, page.next_cursor))
    return respond(request, "recall/_memories.html", "recall/memories.html", context)


@member_page
@require_GET
def conversations(request: HttpRequest, principal: Principal, context: dict) -> HttpResponse:
    """The namespace's conversations (memory.set_from_messages): its sessions, one session's turns each with the
    facts extracted from it, and the extraction queue, its failures first."""
    form = {name: request.GET.get(name, "").strip() for name in ("namespace", "session_id", "cursor")}
    context.update(form=form)
    with errors_shown(context):
        scope = namespace_scope(principal, form, context)
        jobs = extraction_queue.jobs(scope, limit=PAGE)
        context.update(
            scope=scope,
            sessions=reads.sessions(scope, limit=PAGE),
            jobs=sorted(jobs, key=lambda job: job.state != "failed"),  # failures first, each group newest first
        )
        if form["session_id"]:
            held = scope.reading(None, None, form["session_id"])
            page, _ = reads.recall(held, limit=PAGE, cursor=form["cursor"] or None)
            facts = reads.extracted_from(scope, [turn["memory_key"] for turn in page.items])
            context.update(
                turns=[(turn, facts.get(turn["memory_key"], [])) for turn in page.items],
                next_page=next_page(request, scope, page.next_cursor),
            )
    return respond(request, "recall/_conversation.html", "recall/conversations.html", context)


@member_page
@require_GET
def memory(request: HttpRequest, principal: Principal, context: dict, memory_key: str) -> HttpResponse:
    """One key: every version (status, tags, entities, embedding model) and the live rows' chunks."""
    with errors_shown(context):
        scope = namespace_scope(principal, {"namespace": request.GET.get("namespace", "")}, context)
        context.update(
            scope=scope,
            memory_key=memory_key,
            versions=reads.history(scope, memory_key),
            decisions=conflict_decisions.of_key(scope, memory_key),
            chunks=reads.chunks(scope, memory_key),
        )
    status = 404 if "error" not in context and not context["versions"] else 200
    return render(request, "recall/memory.html", context, status=status)


def _search(principal: Principal, form: dict) -> dict:
    """Validate the form as the REST op validates a body, run `search()` with explain, or say what was wrong."""
    body = {"explain": True}
    for name, value in form.items():
        value = value.strip()
        if value and name in LISTS:
            body[name] = [part.strip() for part in value.split(",") if part.strip()]
        elif value:
            body[name] = int(value) if name == "top_k" and value.isdigit() else value
    body.setdefault("namespace", "default")
    serializer = inputs.MemorySearch(data=body)
    try:
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        scope = authorize(principal, None, data.pop("namespace"), Role.VIEWER)
        with costs.accounted(scope.org, scope.namespace, LAB_OP, scope.subject):  # costed like the REST op
            result = service.search(scope, SearchRequest.of(data), op=LAB_OP)
    except (ValidationError, Refusal, customer.ModelCallRefused, remote.EmbedTimeout) as exc:
        return refusal_of(exc).to_envelope()  # what REST would answer, code for code
    reranked = any("rerank_from" in hit["score_components"] for hit in result.hits)
    return {
        "result": result,
        "chart": json.dumps(_chart(result.hits, reranked)),
        "reranked": reranked,
        "keywords": reads.keyword_matches(scope, data["query"]),
    }


def _chart(hits: list[dict], reranked: bool = False) -> dict:
    """Each hit's rank score as one horizontal bar stacked from its parts: the fused relevance and each rank term
    at the scale it counts (under rrf, 1/61). After a reranker, the bars are the fused scores it reordered."""
    labels = [f"{rank}. {hit['memory_key']}" for rank, hit in enumerate(hits, 1)]
    parts = ["relevance"] + [term for term in rank.TERMS if any(hit["score_components"].get(term) for hit in hits)]

    def counted(hit: dict, part: str) -> float:
        components = hit["score_components"]
        scale = 1.0 if part == "relevance" else components.get("term_scale", 1.0)
        return round(scale * components.get(part, 0.0), 6)

    figure = go.Figure(
        [go.Bar(name=part, y=labels, x=[counted(hit, part) for hit in hits], orientation="h") for part in parts],
        layout={
            "barmode": "relative",
            "height": 120 + 28 * len(hits),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 30},
            "yaxis": {"autorange": "reversed", "automargin": True},
            "legend": {"orientation": "h"},
            "title": {
                "text": "fused score before the reranker's order, stacked from its parts"
                if reranked
                else "rank score, stacked from its parts"
            },
        },
    )
    return json.loads(figure.to_json())
