"""What every answer shares: the error envelope, and a memory row as a read shows it."""

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
