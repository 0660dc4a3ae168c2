"""The ops that read rows by key or by listing, each held to its read_scope's user and session."""

from memories import inputs, outputs
from memories.views.base import OpView, held
from retrieval.errors import Refusal
from retrieval.store import audit, conflict_decisions, reads


class MemoryGet(OpView):
    """One memory by key, with its write-gate verdicts; history=true adds every version."""

    op = "memory.get"
    request_serializer = inputs.MemoryGet
    response_serializer = outputs.MemoryGetOut
    refusals = ("MEMORY_NOT_FOUND", "INVALID_KEY")
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        scope = held(scope, data)
        rows = reads.get(scope, data["memory_key"], data.get("agent"))
        if not rows:
            raise Refusal("MEMORY_NOT_FOUND", f"no memory with key {data['memory_key']!r}", "memory_key")
        payload = {**rows[0], "row_count": len(rows)}
        if data["history"]:
            payload["history"] = reads.history(scope, data["memory_key"])
            payload["decisions"] = conflict_decisions.of_key(scope, data["memory_key"])
        audit.sensitive_reads(scope.org, scope.namespace, scope.subject, self.op, rows + payload.get("history", []))
        return self.answer(payload)


class MemoryBulkGet(OpView):
    """Up to 1,000 memories by key; the keys not found are listed."""

    op = "memory.bulk_get"
    request_serializer = inputs.MemoryBulkGet
    response_serializer = outputs.MemoryBulkGetOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY")
    example = {"memory_keys": ["customer.acme.contact", "no.such.key"]}

    def run(self, scope, data):
        keys, scope = list(dict.fromkeys(data["memory_keys"])), held(scope, data)
        found = reads.bulk_get(scope, keys)
        audit.sensitive_reads(scope.org, scope.namespace, scope.subject, self.op, list(found.values()))
        return self.answer(
            {"memories": [found[key] for key in keys if key in found], "missing": [k for k in keys if k not in found]}
        )


class MemoryList(OpView):
    """The namespace's keys, newest first (or by score), a page at a time."""

    op = "memory.list"
    request_serializer = inputs.MemoryList
    response_serializer = outputs.MemoryListOut
    refusals = ("INVALID_CURSOR",)
    example = {"limit": 10}

    def run(self, scope, data):
        page = reads.list_keys(held(scope, data), **data)
        return self.answer({"items": page.items, "next_cursor": page.next_cursor})


class MemoryTimeline(OpView):
    """An entity's, a tag's or a key prefix's memories in time order."""

    op = "memory.timeline"
    request_serializer = inputs.MemoryTimeline
    response_serializer = outputs.TimelineOut
    example = {"entity": "acme"}

    def run(self, scope, data):
        rows, total = reads.timeline(held(scope, data), **data)
        return self.answer({"results": rows, "total_matching": total})


class MemoryRelated(OpView):
    """Memories sharing entities with one memory, most shared first."""

    op = "memory.related"
    request_serializer = inputs.MemoryRelated
    response_serializer = outputs.RelatedOut
    refusals = ("INVALID_KEY",)
    example = {"memory_key": "customer.acme.contact"}

    def run(self, scope, data):
        rows, reason = reads.related(held(scope, data), **data)
        return self.answer({"results": rows, "reason": reason})


class MemoryRecall(OpView):
    """The raw conversation behind a memory (the turns it was extracted from), or a session's turns, in order."""

    op = "memory.recall"
    request_serializer = inputs.MemoryRecall
    response_serializer = outputs.RecallOut
    refusals = ("INVALID_KEY", "INVALID_CURSOR")
    example = {"session_id": "s-15", "limit": 50}

    def run(self, scope, data):
        page, reason = reads.recall(held(scope, data), **data)
        return self.answer({"turns": page.items, "next_cursor": page.next_cursor, "reason": reason})
