"""The response serializers of the ops that configure and measure, and of the health check."""

from rest_framework import serializers


class NamespaceOut(serializers.Serializer):
    namespace = serializers.CharField()
    created = serializers.BooleanField()
    retrieval_defaults = serializers.DictField()
    text_capture = serializers.BooleanField()
    rerank_endpoint = serializers.CharField()
    description = serializers.CharField()
    updated_at = serializers.DateTimeField()
    updated_by = serializers.CharField()


class ModelCallChangeOut(serializers.Serializer):
    enabled = serializers.BooleanField()
    reason = serializers.CharField()
    actor = serializers.CharField()
    changed_at = serializers.DateTimeField()


class ModelCallsOut(serializers.Serializer):
    org = serializers.CharField()
    enabled = serializers.BooleanField(help_text="On unless an admin switched it off.")
    history = ModelCallChangeOut(many=True, help_text="The newest changes first: who, when, why.")


class AuditEntryOut(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(help_text="token:<prefix>, human:<user> (the Lab) or cli:<os user>.")
    action = serializers.CharField(
        help_text="org.set_model_calls, namespace.register, calibration.run, recalibrate, token.issue, token.revoke, "
        "memory.read_sensitive (a high-sensitivity row or a chunk: key read by key)."
    )
    target = serializers.CharField(help_text="The namespace or token it was on; empty for the org itself.")
    detail = serializers.DictField(help_text="What was set.")
    origin = serializers.CharField(
        allow_blank=True, help_text="http:<client address>, process:<pid> for a command; empty for a token's entries."
    )


class AuditListOut(serializers.Serializer):
    org = serializers.CharField()
    entries = AuditEntryOut(many=True, help_text="Newest first.")


class CalibrationOut(serializers.Serializer):
    namespace = serializers.CharField()
    embedding_model = serializers.CharField()
    adaptive = serializers.BooleanField(help_text="False for fake embedders or LOOM_ADAPTIVE_THRESHOLDS=false.")
    tier = serializers.CharField(help_text="namespace, cluster or scalar: where the gates in force come from.")
    gates = serializers.DictField(child=serializers.FloatField())
    inherited = serializers.ListField(
        child=serializers.CharField(),
        help_text="A namespace calibration's gates its pairs did not support (no paraphrases: conflict and "
        "duplicate), served from the cluster calibration.",
    )
    abstain_in_force = serializers.FloatField(
        help_text="The abstain gate a search of this namespace judges by: the tier's, or the noise level's when higher."
    )
    noise = serializers.DictField(
        allow_null=True,
        help_text="The namespace's noise level (real embedders): level (the 90th percentile of off-topic questions' "
        "best cosine against its rows), abstain (level + 0.07), rows, probes, measured_at, age_seconds.",
    )
    calibration_hash = serializers.CharField(allow_null=True)
    calibrated_at = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.FloatField(allow_null=True)
    source = serializers.CharField(allow_null=True, help_text="boot, recalibrate or calibration.run")
    distributions = serializers.DictField(help_text="The probe cosines behind the gates, per corpus.")


class ClickHouseHealthOut(serializers.Serializer):
    ok = serializers.BooleanField()
    backend = serializers.ChoiceField(choices=["embedded", "server", "cluster"])
    version = serializers.CharField(allow_null=True)
    error = serializers.CharField(required=False)


class ProviderOut(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    dim = serializers.IntegerField(required=False)


class HealthOut(serializers.Serializer):
    """`status` for anyone; the rest for an admin token."""

    status = serializers.CharField(help_text="ok, degraded or unavailable")
    clickhouse = ClickHouseHealthOut(required=False)
    embedder = ProviderOut(required=False)
    llm = ProviderOut(required=False)
    problems = serializers.ListField(child=serializers.CharField(), required=False)
    adaptive_thresholds = serializers.DictField(
        help_text="enabled, tier (cluster or scalar), calibration_hash", required=False
    )


class EvalSetOut(serializers.Serializer):
    set_name = serializers.CharField()
    version = serializers.IntegerField(help_text="Each upload of a name is its next version; runs name theirs.")
    questions = serializers.IntegerField()
    uploaded_at = serializers.DateTimeField()


class EvalSetRowOut(EvalSetOut):
    should_abstain = serializers.IntegerField(help_text="How many of its questions should abstain.")
    uploaded_by = serializers.CharField()


class EvalSetListOut(serializers.Serializer):
    sets = EvalSetRowOut(many=True, help_text="Each set at its latest version, by name.")


class EvalRunOut(serializers.Serializer):
    run_id = serializers.CharField(help_text="Sorts by start time.")
    set_name = serializers.CharField()
    set_version = serializers.IntegerField()
    configs = serializers.ListField(child=serializers.DictField(), help_text="The configurations, as sent.")
    total = serializers.IntegerField(help_text="Searches: questions x configurations.")
    status = serializers.ChoiceField(choices=["running", "done", "failed"])
    error = serializers.CharField(allow_blank=True)
    started_from = serializers.ChoiceField(choices=["api", "lab", "cli", "schedule"])
    started_by = serializers.CharField()
    started_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    summary = serializers.DictField(
        allow_null=True,
        help_text="Once done, per configuration: metrics (recall@1/5/10/20, hit@1/5/10, mrr, abstain_rate, "
        "false_abstain), their 95% bootstrap intervals, latency_ms p50/p95, cost_usd, abstain_codes, counts, "
        "by_category.",
    )


class EvalRunListOut(serializers.Serializer):
    runs = EvalRunOut(many=True, help_text="Newest first.")
    next_before = serializers.CharField(allow_null=True, help_text="Send as before for the next page; null: no more.")


class EvalReportOut(EvalRunOut):
    progress = serializers.DictField(child=serializers.IntegerField(), help_text="done and total searches.")
    results = serializers.DictField(
        help_text="Per configuration, so far: what summary holds (by_category: recall@10, hit@10, mrr, "
        "abstain_rate, false_abstain, their intervals, questions)."
    )
    against = serializers.DictField(
        allow_null=True, help_text="With against: that run, as this one is shown (its results per configuration)."
    )
    wins_losses = serializers.DictField(
        allow_null=True,
        help_text="Once both have answered every question: b against a (a_run_id, b_run_id), with wins, losses, ties "
        "and a row per question they differ on (losses first).",
    )
