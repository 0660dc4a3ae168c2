"""The response serializers of the ops that write memory."""

from rest_framework import serializers


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


class MemoryDeleteOut(serializers.Serializer):
    memory_key = serializers.CharField()
    deleted = serializers.IntegerField(help_text="Active rows tombstoned; 0 when none were left.")


class OutcomeOut(serializers.Serializer):
    recorded = serializers.IntegerField()
    outcome = serializers.CharField()


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
