import getpass

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from tenancy.models import NAME_PATTERN, NAME_RULE, ApiToken, Org
from tenancy.roles import Role


class Command(BaseCommand):
    help = "Create, list or revoke API tokens. A token is shown once, at creation."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="issue a token (printed alone on the last line)")
        create.add_argument("--org", required=True)
        create.add_argument(
            "--namespace", action="append", default=[], help="scope to this namespace (repeat); default: all"
        )
        create.add_argument("--role", required=True, choices=[role.label for role in Role])
        create.add_argument("--name", default="", help="a label for listings")
        create.add_argument(
            "--read-scope",
            default="",
            choices=["", "own_user", "own_session"],
            help="a ceiling on every read of the token: only the rows of the user (and session) a request names",
        )
        listing = sub.add_parser("list", help="list tokens (never their secret)")
        listing.add_argument("--org")
        revoke = sub.add_parser("revoke", help="revoke a token by its prefix")
        revoke.add_argument("prefix")

    def handle(self, *args, action, **options):
        getattr(self, f"_{action}")(**options)

    def _create(self, org, namespace, role, name, read_scope, **_):
        found = Org.objects.filter(name=org).first()
        if found is None:
            raise CommandError(f"no org {org!r}; create it with: manage.py loom_org create {org}")
        for ns in namespace:
            if not NAME_PATTERN.fullmatch(ns):
                raise CommandError(f"namespace {ns!r}: must be {NAME_RULE}")
        row, token = ApiToken.issue(found, Role.parse(role), namespace, name, read_scope, created_by=_operator())
        scope = ", ".join(row.namespaces) or "all namespaces"
        if read_scope:
            scope += f", read scope {read_scope}"
        self.stdout.write(f"token {row.prefix}: org {org}, role {role}, {scope}. Shown once; store it now.")
        self.stdout.write(token)

    def _list(self, org=None, **_):
        rows = ApiToken.objects.select_related("org").order_by("org__name", "created_at")
        if org:
            rows = rows.filter(org__name=org)
        self.stdout.write("prefix\torg\trole\tnamespaces\tread_scope\tname\tcreated\tlast_used\tstate")
        for row in rows:
            self.stdout.write(
                "\t".join(
                    [
                        row.prefix,
                        row.org.name,
                        row.role,
                        ",".join(row.namespaces) or "*",
                        row.read_scope or "-",
                        row.name or "-",
                        row.created_at.isoformat(timespec="seconds"),
                        row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "-",
                        "revoked" if row.revoked_at else "active",
                    ]
                )
            )

    def _revoke(self, prefix, **_):
        updated = (
            ApiToken.objects.active().filter(prefix=prefix).update(revoked_at=timezone.now(), revoked_by=_operator())
        )
        if not updated:
            raise CommandError(f"no active token with prefix {prefix!r}")
        self.stdout.write(f"revoked: {prefix}")


def _operator() -> str:
    """Who ran the command: the OS user (a token changed from a shell has no other name), for the audit log."""
    return f"cli:{getpass.getuser()}"
