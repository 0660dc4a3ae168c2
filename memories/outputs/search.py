"""The response serializers of the search ops: hits, verdicts, packs, briefs, answers and traces."""

from rest_framework import serializers


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
        "some and finds none, the search abstains with entity_absent), words_checked (what the query asks about "
        "beyond its names: its content words) and words_absent (those no live row holds: two or more on a weak "
        "pass, the search abstains with content_absent; one raises retrieval_risk a grade), fallback (the weak-pass fallback's "
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
    words_checked = serializers.ListField(
        child=serializers.CharField(), help_text="What the query asks about beyond its names: its content words."
    )
    words_absent = serializers.ListField(
        child=serializers.CharField(), help_text="Those no live row holds: content_absent's evidence."
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
