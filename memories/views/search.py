"""The search ops: memory.search, search.query (the MCP tool loom_search), memory.ask, context.pack, memory.brief and
the search trace."""

from django.conf import settings

from memories import inputs, outputs
from memories.schema import EMBEDS
from memories.views.base import OpView
from retrieval.search import ask, brief, pack, planes, service, trace
from retrieval.search.plan import SearchRequest


class MemorySearch(OpView):
    """Search memories: ranked hits with their score components, or an explicit abstain with its code."""

    op = "memory.search"
    request_serializer = inputs.MemorySearch
    response_serializer = outputs.SearchOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", "INVALID_CURSOR", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?", "top_k": 5}

    def run(self, scope, data):
        result = service.search(scope, SearchRequest.of(data), op=self.called_as, run_id=data.get("run_id", ""))
        return self.answer(result)


class SearchQuery(MemorySearch):
    """Search what memory holds in one call: memories, session digests, entity summaries and records ranked
    together, each hit naming its plane; always paged. The MCP tool loom_search is this op."""

    op = "search.query"
    request_serializer = inputs.SearchQuery
    response_serializer = outputs.SearchOut
    example = {"query": "What did Dana ask about the renewal?", "top_k": 5}

    def run(self, scope, data):
        return super().run(scope, {**data, "paging": True, "planes": frozenset(data.get("planes") or planes.PLANES)})


class MemoryAsk(OpView):
    """Answer a question from memory, citing the memories it used; or say memory does not hold it."""

    op = "memory.ask"
    request_serializer = inputs.MemoryAsk
    response_serializer = outputs.AskOut
    refusals = ("READS_LLM_FREE", "TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?"}

    def run(self, scope, data):
        return self.answer(ask.ask(scope, ask.AskRequest.of(data), run_id=data.get("run_id", ""), op=self.called_as))


class ContextPack(OpView):
    """The best evidence for a task as one block that fits a token budget, each line cited by key, the verdict at
    the top; never a model call."""

    op = "context.pack"
    request_serializer = inputs.ContextPack
    response_serializer = outputs.ContextPackOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Prepare the Acme renewal call", "max_tokens": 300}

    def run(self, scope, data):
        request = pack.PackRequest(SearchRequest.of(data), data["max_tokens"])
        return self.answer(pack.pack(scope, request, op=self.called_as, run_id=data.get("run_id", "")))


class MemoryBrief(OpView):
    """Orientation on a task: memory's answer, its grounding, what memory does not know, and what to read next;
    evidence only (no model call) with allow_synthesis=false or LOOM_READS_LLM_FREE."""

    op = "memory.brief"
    request_serializer = inputs.MemoryAsk
    response_serializer = outputs.BriefOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Prepare the Acme renewal call", "allow_synthesis": False}

    def run(self, scope, data):
        request = ask.AskRequest.of(data)
        return self.answer(brief.brief(scope, request, op=self.called_as, run_id=data.get("run_id", "")))


class MemorySearchTrace(OpView):
    """A search with every leg's candidates and the ranking's inputs, for debugging."""

    op = "memory.search_trace"
    request_serializer = inputs.MemorySearchTrace
    response_serializer = outputs.SearchTraceOut
    refusals = ("TOO_MANY_ITEMS", "INVALID_KEY", *EMBEDS)
    example = {"query": "Who is the Acme contact for the renewal?"}

    def run(self, scope, data):
        return self.answer(service.search_trace(scope, SearchRequest.of(data)))


class MemorySearchTraceLog(OpView):
    """Past searches of the namespace, newest first (query text where the namespace consented)."""

    op = "memory.search_trace_log"
    request_serializer = inputs.SearchTraceLog
    response_serializer = outputs.SearchTraceLogOut
    example = {"limit": 20}

    def run(self, scope, data):
        rows, next_before = trace.page(scope, **data)
        return self.answer(
            {"rows": rows, "next_before": next_before, "enabled": settings.LOOM_SEARCH_TRACE_LOG_ENABLED}
        )
