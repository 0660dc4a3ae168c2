"""Set up the demo install once: org `demo`, namespace `default` (consenting to query text in the search trace
log), a dashboard admin and an API token.

Run by `make run` on every start; a second run reuses what exists. The demo
login and token are kept in var/demo-credentials.json (mode 0600) so they can
be printed again: the token table itself stores only hashes.
"""

import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from retrieval.store import clickhouse, namespaces
from tenancy.access import Scope
from tenancy.models import ApiToken, Membership, Org
from tenancy.roles import Role

ORG, NAMESPACE, USERNAME = "demo", "default", "admin"


class Command(BaseCommand):
    help = "Create the demo org, namespace, dashboard admin and API token (once), and print them."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="where the server will listen (for the message)")
        parser.add_argument("--port", default="8000")
        parser.add_argument("--workers", type=int, default=1, help="the app processes that will serve (gunicorn)")

    def handle(self, *args, host, port, workers, **options):
        if workers > 1 and clickhouse.backend() == "embedded":
            raise CommandError(
                f"WORKERS={workers}: the embedded engine serves from one process (it owns its data directory); "
                "set LOOM_CLICKHOUSE_URL to a ClickHouse server for several, or raise THREADS instead"
            )
        path = settings.VAR_DIR / "demo-credentials.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        org, _ = Org.objects.get_or_create(name=ORG)

        scope = Scope(org=ORG, namespace=NAMESPACE, role=Role.ADMIN, subject="process:bootstrap")
        config = namespaces.get(scope)
        if not config.registered:  # consent recorded once: an operator may withdraw it later
            config, _ = namespaces.register(scope, {"description": "Created by make run.", "text_capture": True})

        User = get_user_model()
        user = User.objects.filter(username=USERNAME).first()
        if user is None or "password" not in saved:
            saved["password"] = secrets.token_urlsafe(12)
            user = user or User(username=USERNAME, is_staff=True, is_superuser=True)
            user.set_password(saved["password"])
            user.save()
        Membership.objects.get_or_create(user=user, org=org, defaults={"role": Role.ADMIN.label})

        if not saved.get("token") or ApiToken.verify(saved["token"]) is None:
            _, saved["token"] = ApiToken.issue(
                org, Role.ADMIN, name="make run demo token", created_by="process:bootstrap"
            )

        path.write_text(json.dumps(saved, indent=2))
        path.chmod(0o600)
        base = f"http://{host}:{port}"
        self.stdout.write(
            f"\n  Loom Recall is starting on {base}\n"
            f"  Recall Lab: {base}/recall   login {USERNAME} / {saved['password']}\n"
            f"  Admin:      {base}/admin/   (the same login)\n"
            f"  API docs:   {base}/v1/docs\n"
            f"  Search trace log: {_trace_log(config)}\n"
            f"  API token (org {ORG}, admin, all namespaces; namespace '{NAMESPACE}' is ready):\n"
            f"  {saved['token']}\n"
        )


def _trace_log(config) -> str:
    if not settings.LOOM_SEARCH_TRACE_LOG_ENABLED:
        return "off (LOOM_SEARCH_TRACE_LOG_ENABLED=false)"
    kept = "query text kept: consent recorded" if config.text_capture else "query text not kept: no consent"
    return f"on, every search ({kept} for namespace '{NAMESPACE}')"
