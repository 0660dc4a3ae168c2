"""`manage.py loom_mcp --token …`: the MCP server over stdio, for desktop clients that start their servers as
commands (Claude Desktop, IDE agents). Every call runs with this token, as over HTTP."""

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server

from mcp_server import dispatch, server
from retrieval.ingest import embed_pending
from tenancy.models import ApiToken


class Command(BaseCommand):
    help = "Serve Loom Recall's MCP tools over stdio."

    def add_arguments(self, parser):
        parser.add_argument("--token", required=True, help="a token from `manage.py loom_token create`")
        parser.add_argument("--namespace", help="the namespace a call that names none reads and writes")

    def handle(self, *args, token: str, namespace: str | None, **options):
        if ApiToken.verify(token) is None:
            raise CommandError("the token is invalid or has been revoked")
        caller = dispatch.Caller(token=token, host=_host(), remote_addr="stdio", namespace=namespace)
        # On the embedded engine this process owns the data, as make run's server would: it embeds stubs and runs
        # deferred extractions too (LOOM_EMBEDDING_WORKER).
        embed_pending.start_worker()
        mcp = server.build(lambda ctx: caller)

        async def serve():
            async with stdio_server() as (read, write):
                await mcp.run(read, write, mcp.create_initialization_options())

        anyio.run(serve)


def _host() -> str:
    """A name LOOM_ALLOWED_HOSTS allows, for the calls' Host: they are this process's own requests."""
    named = [host.lstrip(".") for host in settings.ALLOWED_HOSTS if host != "*"]
    return named[0] if named else "localhost"
