"""The ops that configure and measure: a namespace's registration, calibration, question sets and their runs, an
org's model-call switch and audit log; the health check, and the answer to an op that does not exist."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from memories import inputs, outputs
from memories.errors import error_response, outage, refusal_of
from memories.schema import EMBEDS
from memories.views.base import OpView, read_json
from retrieval import caching, health
from retrieval.errors import Refusal
from retrieval.evaluation import runs, schedule, sets
from retrieval.gates import calibration, thresholds
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.store import audit, namespaces
from retrieval.store.clickhouse import ClickHouseUnavailable
from tenancy import audit as audit_log
from tenancy.access import authorize_org
from tenancy.roles import Role


class NamespaceRegister(OpView):
    """Create or update a namespace: its search defaults, trace-log consent, reranker, description."""

    op = "namespace.register"
    role = Role.ADMIN
    request_serializer = inputs.NamespaceRegister
    response_serializer = outputs.NamespaceOut
    success = (201, 200)
    example = {"namespace": "default", "text_capture": True, "description": "Customer facts and conversations"}

    def run(self, scope, data):
        config, created = namespaces.register(scope, data)
        return self.answer({**config.__dict__, "created": created}, status=201 if created else 200)


class CalibrationGet(OpView):
    """The gates in force for the namespace: tier, values, noise level, distributions."""

    op = "calibration.get"
    response_serializer = outputs.CalibrationOut

    def run(self, scope, data):
        return self.answer(thresholds.report(scope.org, scope.namespace))


class CalibrationRun(OpView):
    """Calibrate the namespace's gates from its own labelled pairs (a real embedder only)."""

    op = "calibration.run"
    role = Role.ADMIN
    request_serializer = inputs.CalibrationRun
    response_serializer = outputs.CalibrationOut
    refusals = ("CALIBRATION_UNAVAILABLE", *EMBEDS)
    example = {
        "similar": [
            ["Who is the Acme contact?", "Dana Reyes is the Acme contact for the renewal."],
            ["When does Acme renew?", "The Acme contract renews in March."],
            ["Which plan is Acme on?", "Acme is on the Enterprise plan."],
            ["Where is Acme based?", "Acme is headquartered in Berlin."],
            ["How does Dana like to be reached?", "Dana prefers email over phone calls."],
        ],
        "distractors": [
            ["Who is the Acme contact?", "The office coffee machine is descaled on Fridays."],
            ["When does Acme renew?", "Parking permits are issued by facilities."],
            ["Which plan is Acme on?", "The staging cluster runs in eu-west-1."],
        ],
    }

    def run(self, scope, data):
        embedder = get_embedder()
        if not thresholds.adaptive(embedder.model_name):
            raise Refusal(
                "CALIBRATION_UNAVAILABLE",
                f"{embedder.model_name} is not calibrated: the scalar gates apply to fake embedders and with "
                "LOOM_ADAPTIVE_THRESHOLDS=false",
            )
        pairs = (data["similar"], data["distractors"], data.get("paraphrases", ()))
        calibration.calibrate_namespace(scope.org, scope.namespace, embedder, *pairs)
        audit.record(
            scope.org,
            scope.subject,
            self.op,
            scope.namespace,
            {name: len(pair_list) for name, pair_list in zip(("similar", "distractors", "paraphrases"), pairs)},
        )
        calibration.keep_pairs(scope.org, scope.namespace, *pairs)
        caching.forget_all()
        return self.answer(thresholds.report(scope.org, scope.namespace))


class EvalSetUpload(OpView):
    """Upload a labelled question set: each question with the keys that answer it, or should_abstain. A name
    uploaded again becomes its next version."""

    op = "eval.set_upload"
    role = Role.ADMIN
    request_serializer = inputs.EvalSetUpload
    response_serializer = outputs.EvalSetOut
    success = (201,)
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY")
    example = {
        "set_name": "support-faq",
        "questions": [
            {
                "id": "q1",
                "question": "Who is the Acme contact for the renewal?",
                "gold_keys": ["customer.acme.contact"],
            },
            {"id": "q2", "question": "What is the capital of Mongolia?", "should_abstain": True},
        ],
    }

    def run(self, scope, data):
        uploaded = sets.upload(scope, data["set_name"], [dict(item) for item in data["questions"]])
        return self.answer(uploaded, status=201)


class EvalSetList(OpView):
    """The namespace's question sets, each at its latest version."""

    op = "eval.set_list"
    response_serializer = outputs.EvalSetListOut

    def run(self, scope, data):
        return self.answer({"sets": sets.listed(scope)})


class EvalRun(OpView):
    """Search every question of a set under each configuration (up to 4), as memory.search would; answers at once
    with the run, which goes on: poll eval.run_get for its progress and metrics (or send wait: true for a small
    set, and read its summary)."""

    op = "eval.run"
    role = Role.ADMIN
    request_serializer = inputs.EvalRun
    response_serializer = outputs.EvalRunOut
    success = (202, 200)
    refusals = ("EVAL_SET_NOT_FOUND", "TOO_MANY_ITEMS")
    example = {
        "set_name": "support-faq",
        "configs": [{"name": "hybrid"}, {"name": "semantic", "search_mode": "semantic"}],
    }

    def run(self, scope, data):
        configs = [dict(config) for config in data.get("configs") or [{"name": "default"}]]
        run = runs.start(
            scope, data["set_name"], configs, data.get("version"), wait=data["wait"], wait_limit=inputs.MAX_EVAL_WAIT
        )
        return self.answer(run, status=200 if data["wait"] else 202)


class EvalRunGet(OpView):
    """A run's progress and, per configuration, recall@k, MRR, hit@k, abstain rates, latency and cost with 95%
    intervals, per category too, and the questions two configurations differ on."""

    op = "eval.run_get"
    request_serializer = inputs.EvalRunGet
    response_serializer = outputs.EvalReportOut
    refusals = ("EVAL_RUN_NOT_FOUND", "EVAL_SET_NOT_FOUND")
    example = {"set_name": "support-faq"}

    def run(self, scope, data):
        return self.answer(runs.report(scope, **data))


class EvalRunList(OpView):
    """The namespace's runs, newest first, each with its metrics once done: a set's history over time."""

    op = "eval.run_list"
    request_serializer = inputs.EvalRunList
    response_serializer = outputs.EvalRunListOut
    example = {"set_name": "support-faq"}

    def run(self, scope, data):
        found = runs.listed(scope, data.get("set_name"), data["limit"] + 1, data.get("before"))
        more = len(found) > data["limit"]
        found = found[: data["limit"]]
        return self.answer({"runs": found, "next_before": found[-1]["run_id"] if more else None})


class OrgOpView(OpView):
    """An op on the token's org itself, not on one of its namespaces."""

    request_serializer = inputs.OrgInput

    def post(self, request):
        data = self.validate(read_json(request))
        return self.metered_run(authorize_org(request.auth, data.pop("org", None), self.role), data)


class OrgSetModelCalls(OrgOpView):
    """Switch the org's model calls off or on; off, nothing model-made reaches the org."""

    op = "org.set_model_calls"
    role = Role.ADMIN
    request_serializer = inputs.OrgSetModelCalls
    response_serializer = outputs.ModelCallsOut
    example = {"enabled": True, "reason": "model calls approved by the customer"}

    def run(self, scope, data):
        return self.answer(customer.set_model_calls(scope.org, data["enabled"], data["reason"], scope.subject))


class OrgGetModelCalls(OrgOpView):
    """Whether the org's model calls are on, with the switch's history."""

    op = "org.get_model_calls"
    role = Role.ADMIN
    response_serializer = outputs.ModelCallsOut

    def run(self, scope, data):
        return self.answer(customer.get_model_calls(scope.org))


class AuditList(OrgOpView):
    """The org's audit log: who changed what (switches, tokens, namespaces, calibration), newest first."""

    op = "audit.list"
    role = Role.ADMIN
    request_serializer = inputs.AuditList
    response_serializer = outputs.AuditListOut
    example = {"limit": 20}

    def run(self, scope, data):
        return self.answer(
            {"org": scope.org, "entries": audit_log.entries(scope.org, data["limit"], data.get("before"))}
        )


class Health(APIView):
    """Whether the service can serve, for anyone (a load balancer, a status page): `status` alone. With an admin
    token, what stands behind it: ClickHouse, the providers in use, the problems list."""

    permission_classes = []

    @extend_schema(
        operation_id="health",
        responses={200: outputs.HealthOut, 503: outputs.HealthOut},
        auth=[{}, {"bearerToken": []}],  # open to anyone; an admin token adds the details
    )
    def get(self, request):
        report = health.report()
        admin = request.auth is not None and request.auth.role >= Role.ADMIN
        if admin and report["clickhouse"]["ok"]:  # the admin's org's own: its question sets' regressions
            report["problems"] += list(schedule.problems(request.auth.org))
        body = outputs.HealthOut(report).data if admin else {"status": report["status"]}
        if not report["clickhouse"]["ok"]:
            # The refusal any op gives; the engine's address and the driver's words are for admins alone.
            body.update(refusal_of(ClickHouseUnavailable(report["clickhouse"]["error"])).to_envelope())
            if admin:
                body["error"]["message"] = report["clickhouse"]["error"]
            return outage(Response(body, status=503))
        return Response(body)


class UnknownOp(APIView):
    authentication_classes = []
    permission_classes = []
    schema = None

    def post(self, request, op):
        return error_response("UNKNOWN_OP", f"there is no op {op!r}; see /v1/docs for the list")

    get = put = patch = delete = post
