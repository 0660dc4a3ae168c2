"""The response serializers of the ops that read rows by key or by listing."""

import json

from rest_framework import serializers

from memories.outputs.base import ConflictDecisionOut, MemoryOut


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


class TimelineOut(serializers.Serializer):
    results = MemoryOut(many=True)
    total_matching = serializers.IntegerField(help_text="Rows matching in all; more than results means more to page.")


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
