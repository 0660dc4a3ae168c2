"""The request serializers of the search ops."""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.fields import (
    Boolean,
    Choice,
    Day,
    Integer,
    Number,
    String,
    StringList,
    Timestamp,
)
from memories.inputs.base import READ_SCOPE_RULES, KeyList, OpInput, Strict, read_scope_needs
from retrieval import options
from retrieval.ingest.write import MEMORY_TYPES
from retrieval.search import planes, rerank


class Reranker(String):
    """none, builtin:openai[:model], builtin:cohere[:model] or a configured endpoint's name."""

    def __init__(self, **kwargs):
        super().__init__(max_chars=256, plain=True, **kwargs)

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if data and (why := rerank.problem(data)):
            raise ValidationError(why)
        return data

    def json_schema(self):
        empty = "|" if self.allow_empty else ""
        return {**super().json_schema(), "pattern": f"^({empty}{rerank.names_pattern()})$"}


class HowToSearch(serializers.Serializer):
    """The fields that choose how a search runs: a memory.search's, and an evaluation's configuration's."""

    search_mode = Choice(options.SEARCH_MODES, required=False)
    recipe = Choice(tuple(options.RECIPES), required=False)
    retrieval_budget = Choice(options.BUDGETS, required=False)
    alpha = Number(min_value=0, max_value=1, required=False)
    hyde = Boolean(required=False)


class MemorySearch(OpInput, HowToSearch):
    query = String(required=False, max_chars=4000, allow_empty=False, help_text="Required unless page is set.")
    top_k = Integer(min_value=1, max_value=500, required=False, help_text="Window size, default 5.")
    agent = String(max_chars=128, default="*", help_text="'*' (default) reads every writer.")
    memory_type = Choice(MEMORY_TYPES, required=False, help_text="Unset: every type but reflection.")
    tags = StringList(max_items=64, max_chars=128, default=list, help_text="OR filter.")
    tags_soft = StringList(max_items=64, max_chars=128, default=list, help_text="A boost, not a filter.")
    category = String(max_chars=128, required=False)
    category_soft = String(max_chars=128, required=False)
    demote_tags = StringList(max_items=64, max_chars=128, default=list)
    entity_filter = StringList(max_items=64, max_chars=256, default=list)
    user_id = String(max_chars=256, required=False, help_text="'-' means no filter.")
    session_id = String(max_chars=256, required=False)
    run_id = String(max_chars=256, required=False)
    read_scope = Choice(("own_user", "own_session"), required=False)
    namespace_scope = Choice(("this", "all_mine"), required=False)
    exclude_keys = KeyList(limit=200, default=list)
    include_duplicates = Boolean(default=False)
    include_superseded = Boolean(default=False)
    include_proposed = Boolean(default=False)
    as_of = Timestamp(required=False)
    as_of_basis = Choice(("valid_time", "knowledge_time"), default="valid_time")
    observation_date = Day(required=False)
    bodies = Choice(options.BODIES, required=False)
    body_budget_tokens = Integer(min_value=1, max_value=1_000_000, required=False)
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    explain = Boolean(default=False)
    render = Choice(
        ("reader",),
        required=False,
        help_text='"reader": also return the hits as one text block (reader_block), the way a model reads evidence.',
    )
    paging = Boolean(default=False)
    page = String(max_chars=128, required=False)
    personalization = Choice(("default", "none"), default="default")
    confidence_weight = Number(min_value=0, max_value=1, required=False)
    recency_pool_weight = Number(min_value=0, max_value=1, required=False)
    reinforcement_weight = Number(min_value=0, max_value=1, required=False)
    chunk_max_share = Number(min_value=0, max_value=1, required=False)
    rerank = Reranker(
        allow_empty=False,
        required=False,
        help_text="none, builtin:openai[:model], builtin:cohere[:model] or a configured endpoint name.",
    )

    rules = (
        {"if": {"not": {"required": ["page"]}}, "then": {"required": ["query"]}},
        *READ_SCOPE_RULES,
    )

    def validate(self, data):
        if "query" not in data and "page" not in data:
            raise ValidationError({"query": [ErrorDetail("this field is required (or send page)", code="required")]})
        return read_scope_needs(data)


class SearchQuery(MemorySearch):
    """memory.search's fields, always paged (an agent reads a window and asks for the next: `next` -> page=), and
    the planes to search."""

    paging = None
    planes = StringList(
        max_items=4,
        choices=planes.PLANES,
        required=False,
        help_text="Of memory, session, entity and record; default every one.",
    )


class ContextPack(MemorySearch):
    """memory.search's scope and filters, and the pack's budget. Never a model call: no budget, HyDE or reranker to
    ask for (the search runs as `fast`)."""

    query = String(max_chars=4000, allow_empty=False, help_text="The task or question the evidence is for.")
    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Hits considered, default 20.")
    max_tokens = Integer(
        min_value=32,
        max_value=32_000,
        default=1000,
        help_text="The block's budget, counted as four characters a token or one a word or mark where that is more.",
    )
    paging = page = render = bodies = body_budget_tokens = explain = None
    retrieval_budget = hyde = rerank = None
    rules = READ_SCOPE_RULES  # query is required


class MemorySearchTrace(MemorySearch):
    """memory.search's fields; a trace explains one query, so there is one."""

    query = String(max_chars=4000, allow_empty=False)
    rules = READ_SCOPE_RULES

    def validate(self, data):
        return read_scope_needs(data)


class RecentMessage(Strict):
    role = Choice(("user", "assistant"))
    content = String(max_chars=4000)


class MemoryAsk(MemorySearch):
    """memory.search's fields (top_k default 15; no paging) and the answer's own."""

    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Hits retrieved, default 15.")
    query = String(max_chars=4000, allow_empty=False)
    paging = None
    page = None
    render = None
    allow_synthesis = Boolean(default=True, help_text="false: the evidence only, no LLM call (source retrieval_only).")
    max_answer_chars = Integer(min_value=50, max_value=20_000, default=2000)
    recent_messages = RecentMessage(
        many=True,
        required=False,
        max_length=40,
        help_text="Up to 40 earlier turns, so a follow-up resolves its referents; never stored.",
    )
    llm_cache = Boolean(
        required=False,
        help_text="Serve and keep the answer in the response cache (default: "
        "LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT, or the namespace in LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES).",
    )
    presupposition_rule = Boolean(
        default=True, help_text="A question whose premise no memory records is answered with that fact first."
    )
    knowledge = Boolean(
        default=True,
        help_text="Search knowledge documents too. This build has none: accepted, "
        "so a caller that opts out is not refused.",
    )

    rules = READ_SCOPE_RULES  # query is required

    def validate(self, data):
        return read_scope_needs(data)


class SearchTraceLog(OpInput):
    since = Timestamp(required=False)
    until = Timestamp(required=False)
    op = String(max_chars=64, required=False)
    abstain = Boolean(required=False)
    risk = Choice(("low", "medium", "high", "abstain"), required=False)
    limit = Integer(min_value=1, max_value=500, default=50)
    before = String(max_chars=64, required=False, help_text="trace_id of the last row of the previous page")
