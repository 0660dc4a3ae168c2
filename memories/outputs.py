"""Response serializers: what each op answers, kept apart from what it accepts."""

import json

from rest_framework import serializers

from retrieval.errors import STATUS


class RefusalOut(serializers.Serializer):
    code = serializers.ChoiceField(sorted(STATUS), help_text="What went wrong, for a program to branch on.")
    message = serializers.CharField(help_text="What went wrong and what to do, for a person.")
    field = serializers.CharField(required=False, help_text="The request field at fault, e.g. `items[3].memory_key`.")
    retry_after = serializers.FloatField(required=False, help_text="RATE_LIMITED: seconds until a retry succeeds.")
    gateway_status = serializers.IntegerField(required=False, help_text="A gateway refusal: the gateway's status.")
    gateway_code = serializers.CharField(required=False, allow_null=True, help_text="A gateway refusal: its code.")


class ErrorOut(serializers.Serializer):
    """Every refusal: one envelope, one status per code."""

    error = RefusalOut()


class MemoryOut(serializers.Serializer):
    memory_key = serializers.CharField()
    value = serializers.CharField()
    memory_type = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    category = serializers.CharField()
    entities = serializers.ListField(child=serializers.CharField())
    triples = serializers.SerializerMethodField()
    confidence = serializers.FloatField()
    source_class = serializers.CharField()
    sensitivity = serializers.CharField()
    pinned = serializers.BooleanField()
    valid_at = serializers.DateTimeField(allow_null=True)
    user_id = serializers.CharField()
    session_id = serializers.CharField()
    run_id = serializers.CharField()
    agent = serializers.CharField(help_text="The writer.")
    version = serializers.IntegerField()
    status = serializers.CharField(help_text="active, superseded or deleted")
    superseded_by = serializers.SerializerMethodField(help_text="The version that replaced this one.")
    embedding_model = serializers.CharField(help_text="Empty when the value is never embedded (high sensitivity).")
    chunk_count = serializers.IntegerField()
    duplicate_of = serializers.SerializerMethodField(help_text="The live row this value duplicates.")
    source_keys = serializers.ListField(
        child=serializers.CharField(),
        help_text="An extracted fact (memory.set_from_messages): the keys of the turns it came from.",
    )
    actor = serializers.CharField(help_text="The token that wrote this version.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_triples(self, row) -> list[dict]:
        return [dict(zip(("subject", "relation", "object"), triple)) for triple in row["triples"]]

    def get_superseded_by(self, row) -> int | None:
        return row["superseded_by"] or None

    def get_duplicate_of(self, row) -> str | None:
        return row.get("duplicate_of") or None

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["confidence"] = round(data["confidence"], 6)  # stored as Float32
        return data


class ConflictDecisionOut(serializers.Serializer):
    memory_key = serializers.CharField()
    version = serializers.IntegerField(help_text="The version of the key the decision is about.")
    other_key = serializers.CharField(help_text="The row it was judged against.")
    other_version = serializers.IntegerField()
    decision = serializers.ChoiceField(["revision", "contradiction", "compatible"])
    reason = serializers.CharField(help_text="The model's stated reason.")
    model = serializers.CharField()
    decided_at = serializers.DateTimeField()


class MemoryGetOut(MemoryOut):
    row_count = serializers.IntegerField(help_text="Active rows of this key (one per writer and session).")
    history = MemoryOut(many=True, required=False, help_text="Every version, newest first (history=true).")
    decisions = ConflictDecisionOut(
        many=True, required=False, help_text="The conflict resolver's decisions on its versions, oldest first."
    )
    # memory.get alone carries the write gates' conflict verdict (memory.bulk_get leaves it out).
    conflict_verdict = serializers.SerializerMethodField(
        help_text="The live row this value conflicts with: memory_key, similarity, threshold, tier; once the "
        "conflict resolver judged it, its `resolution` (revision or contradiction) and `reason`."
    )

    def get_conflict_verdict(self, row) -> dict | None:
        return json.loads(row["conflict_verdict"]) if row.get("conflict_verdict") else None


class MemoryBulkGetOut(serializers.Serializer):
    memories = MemoryOut(many=True)
    missing = serializers.ListField(child=serializers.CharField())


class WriteResultOut(serializers.Serializer):
    memory_key = serializers.CharField()
    agent = serializers.CharField()
    session_id = serializers.CharField()
    outcome = serializers.CharField(help_text="created, updated or unchanged")
    version = serializers.IntegerField()
    superseded_version = serializers.IntegerField(allow_null=True)
    sensitivity = serializers.CharField()
    sensitivity_reason = serializers.CharField(allow_null=True, help_text="What raised the value to high.")
    embedding_model = serializers.CharField()
    chunks = serializers.IntegerField()
    duplicate_of = serializers.CharField(
        allow_null=True,
        help_text="The live row this value duplicates: stored, hidden from search unless include_duplicates.",
    )
    conflict_verdict = serializers.DictField(
        allow_null=True, help_text="The live row this value conflicts with (memory_key, similarity, threshold, tier)."
    )
    write_gates = serializers.ChoiceField(
        ["judged", "skipped", "off", "exempt"],
        help_text='"judged"; "skipped": the batch had too many pairs to scan (LOOM_WRITE_GATES_MAX_PAIRS) or the scan '
        'failed; "off": LOOM_WRITE_GATES=false; "exempt": nothing to judge (a conversation turn, a value never '
        "embedded or stored with a stub, an unchanged value)",
    )
    embedding_pending = serializers.BooleanField(
        help_text="Stored with an embedding stub because the org's model calls are off; search finds it once "
        "`embed_pending` has embedded it."
    )


class FactOut(WriteResultOut):
    value = serializers.CharField()
    memory_type = serializers.CharField(help_text="fact, preference or event")
    source_keys = serializers.ListField(child=serializers.CharField(), help_text="The turns it came from.")


class ConversationOut(serializers.Serializer):
    session_id = serializers.CharField()
    turns = WriteResultOut(many=True, help_text="Each message, as its turn row, in order.")
    facts = FactOut(many=True, help_text="What the turns state, as stored (empty while queued).")
    extraction = serializers.ChoiceField(
        ["done", "queued", "none"],
        help_text='"done"; "queued": deferred, or the model failed and the queue retries (see error); "none": no '
        "turn to read (system and tool messages, secrets)",
    )
    error = serializers.CharField(allow_null=True, help_text="Why the extraction was queued, when it failed.")
    model_calls = serializers.IntegerField(help_text="Extraction calls made (one per batch of turns, more to repair).")
    job_id = serializers.CharField(allow_null=True, help_text="The queued job (extraction.list shows it).")


class MemorySetBatchOut(serializers.Serializer):
    items = WriteResultOut(many=True)
    count = serializers.IntegerField()


class SessionSummaryOut(serializers.Serializer):
    session_id = serializers.CharField()
    outcome = serializers.CharField(help_text="created, updated or unchanged")
    version = serializers.IntegerField()
    sensitivity = serializers.CharField()
    sensitivity_reason = serializers.CharField(allow_null=True, help_text="What raised the summary to high.")
    embedding_model = serializers.CharField(help_text="Empty for a high-sensitivity summary: never embedded.")
    embedding_pending = serializers.BooleanField(help_text="Stored unembedded: the org's model calls are off.")


class SessionSummarySetOut(serializers.Serializer):
    items = SessionSummaryOut(many=True)
    count = serializers.IntegerField()


class SessionSummaryDeleteOut(serializers.Serializer):
    session_id = serializers.CharField()
    deleted = serializers.IntegerField(help_text="1 when a live summary was retired, else 0.")


class EntitySummaryOut(serializers.Serializer):
    entity = serializers.CharField(help_text="Lowercased: as searches and rows' mentions name it.")
    outcome = serializers.CharField(help_text="created, updated or unchanged")
    version = serializers.IntegerField()
    sensitivity = serializers.CharField()
    sensitivity_reason = serializers.CharField(allow_null=True)
    embedding_pending = serializers.BooleanField(help_text="Stored unembedded: the org's model calls are off.")


class EntitySummarySetOut(serializers.Serializer):
    items = EntitySummaryOut(many=True)
    count = serializers.IntegerField()


class EntitySummaryDeleteOut(serializers.Serializer):
    entity = serializers.CharField()
    deleted = serializers.IntegerField(help_text="1 when a live summary was retired, else 0.")


class RecordResultOut(serializers.Serializer):
    record_key = serializers.CharField()
    outcome = serializers.CharField(help_text="created, updated or unchanged")
    version = serializers.IntegerField()
    sensitivity = serializers.CharField()
    sensitivity_reason = serializers.CharField(allow_null=True)


class RecordSetOut(serializers.Serializer):
    items = RecordResultOut(many=True)
    count = serializers.IntegerField()


class RecordDeleteOut(serializers.Serializer):
    record_key = serializers.CharField()
    deleted = serializers.IntegerField(help_text="1 when a live record was retired, else 0.")


class ListItemOut(serializers.Serializer):
    memory_key = serializers.CharField()
    memory_type = serializers.CharField()
    rows = serializers.IntegerField()
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    sensitivity = serializers.CharField(help_text="The newest row's: low, medium or high.")
    excerpt = serializers.CharField(help_text="The newest value's first 160 characters; empty when it is high.")
    duplicate_of = serializers.CharField(allow_null=True, help_text="The live row the newest value duplicates.")


class MemoryListOut(serializers.Serializer):
    items = ListItemOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class MemoryDeleteOut(serializers.Serializer):
    memory_key = serializers.CharField()
    deleted = serializers.IntegerField(help_text="Active rows tombstoned; 0 when none were left.")


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


class SearchHitOut(serializers.Serializer):
    memory_key = serializers.CharField()
    namespace = serializers.CharField(help_text="The source namespace (another one's on an all_mine search).")
    agent = serializers.CharField()
    session_id = serializers.CharField()
    version = serializers.IntegerField()
    content_excerpt = serializers.CharField(help_text="The text it matched on: a passage for a chunk hit.")
    value = serializers.CharField(allow_null=True, help_text="The body bodies= asks for (null for excerpt and none).")
    body_truncated = serializers.BooleanField()
    similarity = serializers.FloatField(help_text="Cosine to the query in [0, 1]; no boost is added to it.")
    rank_score = serializers.FloatField(help_text="What the window is sorted by.")
    below_threshold = serializers.BooleanField()
    source = serializers.CharField(help_text="fact, chunk, summary (a session's digest); search.query: entity, record")
    plane = serializers.CharField(
        help_text="memory (a stored row) or session (a session's digest); search.query also entity (an entity's "
        "summary) and record (a typed record)"
    )
    parent_memory_key = serializers.CharField(allow_null=True)
    source_keys = serializers.ListField(
        child=serializers.CharField(),
        help_text="An extracted fact's conversation turns (memory.recall reads them); a turn a fact above it names "
        "is not a hit of its own.",
    )
    contradicts = serializers.ListField(
        child=serializers.CharField(), help_text="The keys the conflict resolver found this version contradicted by."
    )
    chunk_index = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    superseded_by = serializers.IntegerField(allow_null=True)
    source_class = serializers.CharField()
    verified = serializers.BooleanField()
    memory_type = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    entities = serializers.ListField(child=serializers.CharField())
    valid_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True, help_text="null for a record (search.query)")
    score_components = serializers.DictField(child=serializers.FloatField())


class ComputedFromOut(serializers.Serializer):
    namespace = serializers.CharField()
    memory_key = serializers.CharField()
    agent = serializers.CharField()
    session_id = serializers.CharField()
    version = serializers.IntegerField()
    dated_at = serializers.DateTimeField()


class ComputedOut(serializers.Serializer):
    kind = serializers.CharField(help_text="count, sum, temporal_diff or latest")
    value = serializers.JSONField(help_text="the count, the sum, the days, or the newest value")
    unit = serializers.CharField(
        required=False, help_text="a sum's unit: USD, EUR, GBP, JPY, hour, km, mile, kg or lb (minutes count as hours)"
    )
    text = serializers.CharField(help_text="the evidence as one line a model can read")
    computed_from = ComputedFromOut(many=True, help_text="the rows it was computed from (a count names its first 20)")


class RecordOut(serializers.Serializer):
    namespace = serializers.CharField()
    record_key = serializers.CharField()
    record_type = serializers.CharField()
    text = serializers.CharField(help_text="The record as one line.")
    matched = serializers.FloatField(help_text="The share of the question's words the record holds.")

    def get_fields(self):
        # `fields` is the wire name, and a serializer's own attribute: declared here, not as a class attribute.
        return {**super().get_fields(), "fields": serializers.DictField(child=serializers.CharField())}


class SearchOut(serializers.Serializer):
    hits = SearchHitOut(many=True)
    abstain = serializers.BooleanField()
    abstain_code = serializers.CharField(
        allow_null=True, help_text="no_match, below_threshold, entity_absent, low_calibrated_confidence, page_expired"
    )
    abstain_reason = serializers.CharField(allow_null=True, help_text="Prose: branch on abstain_code, never on this.")
    retrieval_confidence = serializers.FloatField()
    retrieval_risk = serializers.CharField(help_text="low, medium, high or abstain")
    candidates_total = serializers.IntegerField()
    namespaces_searched = serializers.ListField(child=serializers.CharField())
    namespaces_skipped = serializers.ListField(child=serializers.CharField())
    pending_extraction = serializers.IntegerField()
    degraded = serializers.ListField(child=serializers.CharField())
    next = serializers.CharField(allow_null=True, help_text="Pass as page= for the next window (paging=true).")
    search_mode = serializers.CharField()
    mode_source = serializers.CharField(help_text="request, recipe, namespace, default, planner or page")
    recipe = serializers.CharField(allow_null=True)
    retrieval_budget = serializers.CharField()
    thresholds = serializers.DictField(help_text="The gates in force and their tier.")
    query_entities = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(child=serializers.CharField())
    computed = ComputedOut(
        many=True,
        help_text="What the question asks to be computed (count, temporal_diff, latest), from the rows in scope.",
    )
    records = RecordOut(many=True, help_text="Typed records sharing the question's words (record.set).")
    latency_ms = serializers.FloatField()
    stage_ms = serializers.DictField(child=serializers.FloatField())
    trace_id = serializers.CharField()
    reader_block = serializers.CharField(
        allow_null=True, help_text='render="reader": the hits as one numbered text block (key, date, text).'
    )
    retrieval_work = serializers.DictField(
        help_text="query_spellings (query words embedded as the namespace's rows spell them: as typed -> as "
        "spelled), query_spellings_skipped (the lookup failed, timed out or backs off: embedded as typed), "
        "names_checked (the names the query is about) and names_found (those a live row mentions: when it names "
        "some and finds none, the search abstains with entity_absent), fallback (the weak-pass fallback's "
        "rounds, LLM calls, and why it did not run), retrieval_cost_estimate, and vector_read (clickhouse, mirror, "
        "codes or bits: how the vector leg read)."
    )


class PackedLineOut(serializers.Serializer):
    memory_key = serializers.CharField()
    namespace = serializers.CharField()
    session_id = serializers.CharField()
    truncated = serializers.BooleanField(help_text="Cut to the room the budget left.")


class ContextPackOut(serializers.Serializer):
    context = serializers.CharField(
        help_text="The block: the verdict first, then a line per memory, best first: [key] date text."
    )
    tokens = serializers.IntegerField(help_text="The block's tokens, as max_tokens counts them: never more.")
    max_tokens = serializers.IntegerField()
    memory_keys = serializers.ListField(child=serializers.CharField(), help_text="The keys the block cites, in order.")
    lines = PackedLineOut(many=True)
    left_out = serializers.IntegerField(help_text="Hits found but not packed: over the budget, or said already.")
    abstain = serializers.BooleanField()
    abstain_code = serializers.CharField(allow_null=True)
    abstain_reason = serializers.CharField(allow_null=True)
    retrieval_risk = serializers.CharField()
    pending_extraction = serializers.IntegerField()
    degraded = serializers.ListField(child=serializers.CharField())
    trace_id = serializers.CharField()


class GroundingOut(serializers.Serializer):
    memory_key = serializers.CharField()
    namespace = serializers.CharField()
    excerpt = serializers.CharField()
    dated = serializers.DateTimeField(help_text="valid_at, else when it was written.")
    cited = serializers.BooleanField(help_text="The answer cites it.")
    contradicts = serializers.ListField(child=serializers.CharField())


class UnknownOut(serializers.Serializer):
    kind = serializers.CharField(help_text="abstain, contradiction, pending_extraction or weak_evidence")
    detail = serializers.CharField()
    memory_keys = serializers.ListField(child=serializers.CharField())


class ReadNextOut(serializers.Serializer):
    op = serializers.CharField()
    arguments = serializers.DictField()
    why = serializers.CharField()


class BriefOut(serializers.Serializer):
    answer = serializers.CharField(allow_null=True, help_text="memory.ask's answer; null for evidence only.")
    source = serializers.CharField(help_text="As memory.ask's: synthesized, retrieval_only, abstained, record, ...")
    grounding = GroundingOut(many=True, help_text="The evidence, best first.")
    unknowns = UnknownOut(many=True, help_text="What memory does not know, or not for certain.")
    read_next = ReadNextOut(many=True, help_text="Ops worth calling next, with their arguments.")
    abstain = serializers.BooleanField()
    abstain_code = serializers.CharField(allow_null=True)
    retrieval_risk = serializers.CharField()
    pending_extraction = serializers.IntegerField()
    degraded = serializers.ListField(child=serializers.CharField())
    trace_id = serializers.CharField()


class AskOut(serializers.Serializer):
    answer = serializers.CharField(
        allow_null=True, help_text="The synthesised answer, citing [memory_key]; null unless source is synthesized."
    )
    source = serializers.CharField(
        help_text="synthesized, retrieval_only, abstained, record (a typed record answered) or precedent (a recorded decision)"
    )
    memory_keys = serializers.ListField(child=serializers.CharField(), help_text="The keys the answer cites, in order.")
    cited_sessions = serializers.ListField(child=serializers.CharField())
    hits = SearchHitOut(many=True, help_text="The evidence: the search's window.")
    computed = ComputedOut(many=True, help_text="Computed evidence, also given to the model with the memories.")
    records = RecordOut(many=True, help_text="Typed records sharing the question's words.")
    abstain = serializers.BooleanField()
    abstain_code = serializers.CharField(allow_null=True)
    abstain_reason = serializers.CharField(allow_null=True)
    retrieval_confidence = serializers.FloatField()
    retrieval_risk = serializers.CharField()
    pending_extraction = serializers.IntegerField(
        help_text="Deferred extractions queued for this scope: a thin answer may not be evidence of absence."
    )
    superseded_dropped = serializers.IntegerField(
        help_text="Retired values of the window's keys kept out of synthesis."
    )
    stale_sentences_masked = serializers.IntegerField(
        help_text="Answer sentences masked for restating a retired value."
    )
    external_excluded = serializers.IntegerField(
        help_text="Unattested external hits kept out of synthesis (LOOM_MEMORY_ASK_EXCLUDE_UNVERIFIED_EXTERNAL)."
    )
    answer_truncated = serializers.BooleanField(help_text="The answer was cut at max_answer_chars.")
    model = serializers.CharField(allow_null=True, help_text="The model that wrote the answer.")
    model_tier = serializers.ChoiceField(
        ["cheap", "mid", "synth"],
        allow_null=True,
        help_text="How hard the ask was read to be, choosing the model (LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP, "
        "LOOM_MEMORY_ASK_MID_MODEL, LOOM_MEMORY_ASK_SYNTH_MODEL); null when no model was asked.",
    )
    llm_cache_hit = serializers.BooleanField()
    llm_cache_saved_usd = serializers.FloatField(help_text="What the cached answer would have cost (estimated).")
    degraded = serializers.ListField(
        child=serializers.CharField(), help_text="What did not run, e.g. synthesis:model_calls_off, synthesis:failed."
    )
    search_mode = serializers.CharField()
    trace_id = serializers.CharField()
    latency_ms = serializers.FloatField()
    stage_ms = serializers.DictField(child=serializers.FloatField())


class TraceHitOut(serializers.Serializer):
    memory_key = serializers.CharField()
    namespace = serializers.CharField()
    agent = serializers.CharField()
    session_id = serializers.CharField()
    version = serializers.IntegerField()
    distance = serializers.FloatField()
    similarity = serializers.FloatField()
    entity_boost = serializers.FloatField()
    rank_score = serializers.FloatField()
    rank = serializers.IntegerField()
    source = serializers.CharField()
    below_threshold = serializers.BooleanField()


class SearchTraceOut(serializers.Serializer):
    hits = TraceHitOut(many=True)
    candidates_total = serializers.IntegerField()
    embedding_model = serializers.CharField()
    key_axis = serializers.BooleanField()
    vector_read = serializers.CharField(
        help_text="How the vector leg read: clickhouse (an exact scan in SQL), mirror (the exact scan of the "
        "process's copy), codes (int8 codes first, the best rescored at full precision), bits (the int8 codes of "
        "the rows whose sign bits are nearest the query's, in a mirror whose recent queries showed that they keep "
        "the nearest rows), empty when it did not run."
    )
    thresholds = serializers.DictField()
    degraded = serializers.ListField(child=serializers.CharField())
    query_spellings = serializers.DictField(
        child=serializers.CharField(), help_text="Query words embedded in the corpus spelling: as typed -> as spelled."
    )
    query_spellings_skipped = serializers.BooleanField(help_text="The spelling lookup failed, timed out or backs off.")
    names_checked = serializers.ListField(child=serializers.CharField(), help_text="The names the query is about.")
    names_found = serializers.ListField(
        child=serializers.CharField(), help_text="Those a live row mentions; none of several: entity_absent."
    )
    latency_ms = serializers.FloatField()


class TraceLogRowOut(serializers.Serializer):
    created_at = serializers.DateTimeField()
    trace_id = serializers.CharField()
    op = serializers.CharField()
    caller = serializers.CharField()
    run_id = serializers.CharField()
    query = serializers.CharField(help_text="Empty unless the namespace consents to text capture.")
    query_captured = serializers.BooleanField()
    search_mode = serializers.CharField()
    top_k = serializers.IntegerField()
    keys = serializers.ListField(child=serializers.CharField())
    scores = serializers.ListField(child=serializers.FloatField())
    similarities = serializers.ListField(child=serializers.FloatField())
    abstain = serializers.BooleanField()
    abstain_code = serializers.CharField()
    retrieval_risk = serializers.CharField()
    retrieval_confidence = serializers.FloatField()
    candidates_total = serializers.IntegerField()
    degraded = serializers.ListField(child=serializers.CharField())
    latency_ms = serializers.FloatField()
    stage_ms = serializers.DictField(child=serializers.FloatField())


class SearchTraceLogOut(serializers.Serializer):
    rows = TraceLogRowOut(many=True)
    next_before = serializers.CharField(allow_null=True, help_text="Pass as before= for the next page.")
    enabled = serializers.BooleanField(help_text="false: LOOM_SEARCH_TRACE_LOG_ENABLED is off, no search is logged.")


class OutcomeOut(serializers.Serializer):
    recorded = serializers.IntegerField()
    outcome = serializers.CharField()


class TimelineOut(serializers.Serializer):
    results = MemoryOut(many=True)
    total_matching = serializers.IntegerField(help_text="Rows matching in all; more than results means more to page.")


class ExtractionJobOut(serializers.Serializer):
    job_id = serializers.CharField()
    task = serializers.ChoiceField(
        ["facts", "entities"],
        help_text="facts: a conversation's extraction; entities: the entity extractor naming rows written without.",
    )
    state = serializers.ChoiceField(["pending", "done", "failed"])
    session_id = serializers.CharField()
    turn_keys = serializers.ListField(
        child=serializers.CharField(), help_text="The rows it reads: the turns (facts), the memories (entities)."
    )
    agent = serializers.CharField()
    user_id = serializers.CharField()
    enqueued_by = serializers.CharField(help_text="The token that wrote the rows: whose the model call is.")
    attempts = serializers.IntegerField()
    due_at = serializers.DateTimeField(help_text="A pending job is not tried before.")
    error = serializers.CharField(help_text="The last attempt's failure; empty once done.")
    facts = serializers.IntegerField(help_text="Rows written, once done: facts stored, or rows newly named.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ExtractionListOut(serializers.Serializer):
    jobs = ExtractionJobOut(many=True, help_text="Newest first.")


class RecallOut(serializers.Serializer):
    turns = MemoryOut(many=True, help_text="In the order they were said.")
    next_cursor = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="source_not_found or source_has_no_turns when empty.")


class RelatedRowOut(MemoryOut):
    overlap = serializers.IntegerField()
    shared = serializers.ListField(child=serializers.CharField(), help_text="The entities shared, lowercased.")


class RelatedOut(serializers.Serializer):
    results = RelatedRowOut(many=True)
    reason = serializers.CharField(allow_null=True, help_text="source_has_no_entities or source_not_found when empty.")


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
