"""Response serializers: what each op answers, kept apart from what it accepts."""

from rest_framework import serializers


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
    actor = serializers.CharField(help_text="The token that wrote this version.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_triples(self, row) -> list[dict]:
        return [dict(zip(("subject", "relation", "object"), triple)) for triple in row["triples"]]

    def get_superseded_by(self, row) -> int | None:
        return row["superseded_by"] or None

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["confidence"] = round(data["confidence"], 6)  # stored as Float32
        return data


class MemoryGetOut(MemoryOut):
    row_count = serializers.IntegerField(help_text="Active rows of this key (one per writer and session).")
    history = MemoryOut(many=True, required=False, help_text="Every version, newest first (history=true).")


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


class MemorySetBatchOut(serializers.Serializer):
    items = WriteResultOut(many=True)
    count = serializers.IntegerField()


class ListItemOut(serializers.Serializer):
    memory_key = serializers.CharField()
    memory_type = serializers.CharField()
    rows = serializers.IntegerField()
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


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


class ClickHouseHealthOut(serializers.Serializer):
    ok = serializers.BooleanField()
    backend = serializers.CharField()
    version = serializers.CharField(allow_null=True)
    error = serializers.CharField(required=False)


class ProviderOut(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    dim = serializers.IntegerField(required=False)


class HealthOut(serializers.Serializer):
    status = serializers.CharField(help_text="ok, degraded or unavailable")
    clickhouse = ClickHouseHealthOut()
    embedder = ProviderOut()
    llm = ProviderOut()
    problems = serializers.ListField(child=serializers.CharField())
