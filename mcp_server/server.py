"""The MCP server (the official SDK's low-level `Server`): tools/list from `tools`, tools/call run as the tool's op
(`dispatch`) on a worker thread, so the event loop keeps serving while ClickHouse answers."""

import json
from collections.abc import Callable

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mcp_server import dispatch, tools

INSTRUCTIONS = (
    "Loom Recall is this agent's long-term memory. Call loom_search before answering from past sessions, and trust "
    "its abstain: when it says memory does not know, say so. Write what a later session will need with memory_set, "
    "or hand whole conversations to memory_set_from_messages."
)


def build(caller_of: Callable[[ServerRequestContext], dispatch.Caller]) -> Server:
    """A server whose calls run as the caller `caller_of` reads from each request's context (its HTTP request's
    token, or the stdio process's)."""

    async def list_tools(ctx: ServerRequestContext, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listed())

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.TOOLS.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"no tool {params.name!r}: tools/list names them")
        caller = caller_of(ctx)
        answer = await anyio.to_thread.run_sync(dispatch.call, tool.op, tool.name, params.arguments or {}, caller)
        return result(answer)

    return Server(
        "loom-recall",
        title="Loom Recall",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def result(answer: dispatch.Answer) -> types.CallToolResult:
    """The op's answer as a tool result: its JSON body, structured and as text; a refusal is a tool error whose
    text leads with its code and the field it names, as the REST envelope does."""
    if answer.ok:
        text = json.dumps(answer.body, separators=(",", ":"), default=str)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=answer.body)
    error = answer.body["error"]
    field = f" (field: {error['field']})" if error.get("field") else ""
    text = f"{error['code']}: {error['message']}{field}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=answer.body, is_error=True
    )
