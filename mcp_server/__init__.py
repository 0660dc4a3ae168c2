"""The MCP door: the official `mcp` SDK serving Loom's ops as tools, over streamable HTTP at /mcp and over stdio
(`manage.py loom_mcp`). Each tool call runs as its op's REST request (`dispatch`): one code path for both doors."""
