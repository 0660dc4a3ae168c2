import hashlib
import hmac
import re
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenancy.roles import CHOICES, Role

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
READ_SCOPES = [("", "no limit"), ("own_user", "own_user"), ("own_session", "own_session")]
NAME_RULE = "1-128 characters: letters, digits, '.', '_', ':' or '-', starting with a letter or digit"


class Org(models.Model):
    name = models.CharField(max_length=128, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return self.name


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        # ApiToken.verify's written statement (_ACTIVE_BY_PREFIX) says the same in SQL: change both together.
        return self.filter(revoked_at__isnull=True)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token: one org, a role, and a namespace scope (empty = all of the org's).

    Only the sha256 of the token is stored; the token itself is shown once at
    creation. `prefix` is its public, non-secret part, used to find the row
    and to name the token in listings.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=128, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=CHOICES)
    namespaces = models.JSONField(default=list, blank=True)
    # A ceiling on what the token's searches read: a request can only narrow it.
    read_scope = models.CharField(max_length=16, blank=True, default="", choices=READ_SCOPES)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Who issued and revoked it (cli:<os user>, process:bootstrap): with the two dates, the token's audit entries
    # (tenancy/audit.py). Kept here, not in ClickHouse, so the commands run while the embedded engine is held.
    created_by = models.CharField(max_length=128, blank=True, default="")
    revoked_by = models.CharField(max_length=128, blank=True, default="")

    objects = ApiTokenQuerySet.as_manager()

    @classmethod
    def issue(
        cls, org: Org, role: Role, namespaces=(), name: str = "", read_scope: str = "", created_by: str = ""
    ) -> tuple["ApiToken", str]:
        """Create a token; returns the row and the plaintext token (never stored)."""
        prefix = secrets.token_hex(4)
        token = f"loom_{prefix}_{secrets.token_urlsafe(32)}"
        row = cls.objects.create(
            org=org,
            name=name,
            prefix=prefix,
            digest=_digest(token),
            role=role.label,
            namespaces=sorted(set(namespaces)),
            read_scope=read_scope,
            created_by=created_by,
        )
        return row, token

    @classmethod
    def verify(cls, token: str) -> "ApiToken | None":
        """The active token this plaintext names, compared in constant time; else None."""
        parts = token.split("_")
        if len(parts) < 3 or parts[0] != "loom":
            return None
        # Written out, not built by the ORM: building and compiling the query was ~0.3 of this lookup's ~0.5 ms,
        # and every request makes it. A prefix names at most one token.
        row = next(iter(cls.objects.raw(_ACTIVE_BY_PREFIX, [parts[1]])), None)
        if row is None or not hmac.compare_digest(row.digest, _digest(token)):
            return None
        # Its org's other fields deferred: read if asked for.
        row.org = Org.from_db(row._state.db, ["id", "name"], [row.org_id, row.org_name])
        return row

    @property
    def role_enum(self) -> Role:
        return Role.parse(self.role)

    @property
    def subject(self) -> str:
        return f"token:{self.prefix}"

    def touch(self):
        """Record use, at most once a minute (a write per request would cost more than it tells)."""
        now = timezone.now()
        if self.last_used_at is None or (now - self.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)

    def __str__(self):
        return f"{self.prefix} ({self.org.name}, {self.role})"


# `ApiTokenQuerySet.active()` for one prefix, with the org's name.
_ACTIVE_BY_PREFIX = (
    f"SELECT token.*, org.name AS org_name FROM {ApiToken._meta.db_table} AS token "
    f"JOIN {Org._meta.db_table} AS org ON org.id = token.org_id "
    "WHERE token.prefix = %s AND token.revoked_at IS NULL"
)


class Membership(models.Model):
    """A dashboard user's role in an org."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=CHOICES)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="one_membership_per_org")]

    @property
    def role_enum(self) -> Role:
        return Role.parse(self.role)
