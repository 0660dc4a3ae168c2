"""The tools: each an op of the REST API, with its intent (mcp_server/descriptions.py) and its input schema taken
from the OpenAPI document the same serializers generate (GET /v1/schema), so the two cannot drift."""

import functools
from dataclasses import dataclass

import mcp_types as types
from drf_spectacular.generators import SchemaGenerator

from mcp_server import descriptions


@dataclass(frozen=True)
class Tool:
    name: str
    op: str
    description: str
    writes: bool = False
    shape: str | None = None  # the request component to state, where the op takes more than one (memory.set)

    @property
    def annotations(self) -> types.ToolAnnotations:
        return types.ToolAnnotations(
            read_only_hint=not self.writes,
            destructive_hint=self.op == "memory.delete",
            idempotent_hint=not self.writes or self.op == "memory.delete",
            open_world_hint=False,
        )


# In the order tools/list gives them: the search first, as the one an agent should reach for.
TOOLS = {
    tool.name: tool
    for tool in (
        Tool("loom_search", "search.query", descriptions.LOOM_SEARCH),
        Tool("context_pack", "context.pack", descriptions.CONTEXT_PACK),
        Tool("memory_brief", "memory.brief", descriptions.MEMORY_BRIEF),
        Tool("memory_ask", "memory.ask", descriptions.MEMORY_ASK),
        Tool("memory_get", "memory.get", descriptions.MEMORY_GET),
        Tool("memory_recall", "memory.recall", descriptions.MEMORY_RECALL),
        Tool("memory_set", "memory.set", descriptions.MEMORY_SET, writes=True, shape="MemorySetOne"),
        Tool("memory_set_from_messages", "memory.set_from_messages", descriptions.MEMORY_SET_FROM_MESSAGES, True),
        Tool("memory_delete", "memory.delete", descriptions.MEMORY_DELETE, writes=True),
        Tool("memory_outcome", "memory.outcome", descriptions.MEMORY_OUTCOME, writes=True),
    )
}


@functools.cache
def listed() -> list[types.Tool]:
    """tools/list's answer, made once a process (the OpenAPI document takes ~0.7 s to generate)."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    components = document["components"]["schemas"]

    def schema_of(tool: Tool) -> dict:
        if tool.shape:
            return _inlined({"$ref": f"#/components/schemas/{tool.shape}"}, components)
        body = document["paths"][f"/v1/{tool.op}"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        return _inlined(body, components)

    return [
        types.Tool(name=t.name, description=t.description, input_schema=schema_of(t), annotations=t.annotations)
        for t in TOOLS.values()
    ]


def _inlined(schema, components: dict):
    """The schema with every `$ref` to a component replaced by the component: a tool's schema stands alone."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inlined(components[schema["$ref"].rsplit("/", 1)[1]], components)
        return {key: _inlined(value, components) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inlined(item, components) for item in schema]
    return schema
