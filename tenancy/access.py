"""Who may do what: the one place tenancy is decided.

Every op names the role it needs; `authorize` turns a verified token and the
org and namespace a request addresses into a `Scope`, or refuses. Service
code takes a `Scope` and reads `scope.org` from it, never from the request.
"""

from dataclasses import dataclass, replace

from retrieval.errors import Refusal
from tenancy.models import NAME_PATTERN, NAME_RULE, ApiToken
from tenancy.roles import Role


@dataclass(frozen=True)
class Principal:
    """A verified caller: the org, the role and the namespaces it may address."""

    org: str
    role: Role
    namespaces: frozenset[str] | None  # None: every namespace of the org
    subject: str
    read_scope: str = ""  # the token's ceiling on reads: "", own_user or own_session

    @classmethod
    def of_token(cls, token: ApiToken) -> "Principal":
        return cls(
            org=token.org.name,
            role=token.role_enum,
            namespaces=frozenset(token.namespaces) if token.namespaces else None,
            subject=token.subject,
            read_scope=token.read_scope,
        )

    @classmethod
    def of_membership(cls, membership) -> "Principal":
        """A dashboard user in one of their orgs: every namespace of it, at the membership's role."""
        return cls(
            org=membership.org.name,
            role=membership.role_enum,
            namespaces=None,
            subject=f"human:{membership.user.get_username()}",
        )

    def may_read(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


READ_SCOPE_ORDER = {"": 0, "own_user": 1, "own_session": 2}


@dataclass(frozen=True)
class Scope:
    """An authorized (org, namespace) for one request."""

    org: str
    namespace: str
    role: Role
    subject: str
    namespaces: frozenset[str] | None = None  # what else the caller may read (None: all of the org's)
    read_scope: str = ""  # the token's ceiling on reads: "", own_user or own_session
    # The end user and session every read of this request is held to (`reading`); None: any.
    user_id: str | None = None
    session_id: str | None = None

    def may_read(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def reading(self, asked: str | None, user_id: str | None, session_id: str | None) -> "Scope":
        """This scope held to the rows a read names: its user's (and session's) when it names one ("-": any; "":
        the rows of none). The token's read_scope is a ceiling the request's own only narrows: under own_user a read
        must name its user, under own_session its session too, and reads theirs alone, whatever the op (search, get,
        list, timeline)."""
        in_force = max(self.read_scope or "", asked or "", key=READ_SCOPE_ORDER.__getitem__)
        named = {
            name: None if value in (None, "-") else value
            for name, value in (("user_id", user_id), ("session_id", session_id))
        }
        needs = {"own_user": ("user_id",), "own_session": ("user_id", "session_id")}.get(in_force, ())
        for name in needs:
            if not named[name]:
                raise Refusal("MISSING_FIELD", f"read_scope {in_force} needs the request's {name}", name, 422)
        return replace(self, **named)


def authorize(principal: Principal, org: str | None, namespace: str, needs: Role) -> Scope:
    if org is not None and org != principal.org:
        raise Refusal("ORG_MISMATCH", f"this token belongs to org {principal.org!r}, not {org!r}", "org")
    if not NAME_PATTERN.fullmatch(namespace):
        raise Refusal("INVALID_NAMESPACE", f"namespace must be {NAME_RULE}", "namespace")
    if not principal.may_read(namespace):
        raise Refusal("NAMESPACE_FORBIDDEN", f"this token is not scoped to namespace {namespace!r}", "namespace")
    if principal.role < needs:
        raise Refusal(
            "ROLE_FORBIDDEN", f"this operation needs the {needs.label} role; the token has {principal.role.label}"
        )
    return Scope(
        org=principal.org,
        namespace=namespace,
        role=principal.role,
        subject=principal.subject,
        namespaces=principal.namespaces,
        read_scope=principal.read_scope,
    )


def authorize_org(principal: Principal, org: str | None, needs: Role) -> Scope:
    """An op on the org itself: the token's own org, a token not narrowed to some namespaces, the role."""
    if org is not None and org != principal.org:
        raise Refusal("ORG_MISMATCH", f"this token belongs to org {principal.org!r}, not {org!r}", "org")
    if principal.namespaces is not None:
        raise Refusal("NAMESPACE_FORBIDDEN", "an org operation needs a token not limited to some namespaces")
    if principal.role < needs:
        raise Refusal(
            "ROLE_FORBIDDEN", f"this operation needs the {needs.label} role; the token has {principal.role.label}"
        )
    return Scope(org=principal.org, namespace="", role=principal.role, subject=principal.subject)
