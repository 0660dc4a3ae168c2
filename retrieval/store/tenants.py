"""Tenancy at the door to ClickHouse: a statement that reads an org's rows names the org.

Every table keyed by org (it has an `org` column) is read only with the org bound: `org = {org:String}` or
`org IN {orgs:Array(String)}`. A statement that reads across orgs on purpose (a worker's sweep, the warm start)
says so at its call, `every_org=True`. As PostHog's `team_id` rule, the check runs at the one door every statement
passes (`clickhouse.query` and `command`); it is on under the tests (`checked`), where one that forgets its org
fails a test instead of showing a tenant another's rows. It catches a forgotten org, not a wrong one: which org a
request may read is tenancy/access.py's decision, made once.
"""

import re
from typing import Protocol

# The org-keyed tables a statement must name its org to read (schema.org_keyed()); empty, nothing is checked. The
# tests set them (tests/conftest.py): the store's lower rooms never import the schema, which imports them.
checked: frozenset[str] = frozenset()

# The tables a statement reads or rewrites: after FROM or JOIN (a subquery's too), or an ALTER's mutation.
_READS = re.compile(
    r"\b(?:FROM|JOIN)\s+(?:\w+\.)?(\w+)|\bALTER\s+TABLE\s+(?:\w+\.)?(\w+)[^;]*?\b(?:DELETE|UPDATE)\b", re.I
)
_NAMED = re.compile(r"\{orgs?:(?:String|Array\(String\))\}")
_DDL = re.compile(
    r"^\s*(?:CREATE|DROP|RENAME|EXCHANGE|SYSTEM|OPTIMIZE|TRUNCATE|ALTER\s+TABLE\s+\S+\s+(?:ADD|MODIFY|DROP|MATERIALIZE))\b",
    re.I,
)


class Tenant(Protocol):
    """What the store reads of a request's scope (tenancy/access.py's `Scope` is one): whose rows, who asks, and
    the end user and session a read is held to. The store takes it by shape, so it never imports tenancy."""

    @property
    def org(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def user_id(self) -> str | None: ...
    @property
    def session_id(self) -> str | None: ...


class OrgNotNamed(AssertionError):
    """A statement read an org's table without naming the org (raised only while `checked` holds tables)."""


def check(sql: str, every_org: bool) -> None:
    """Refuse `sql` if it reads a table keyed by org without binding the org, unless it reads every org on purpose."""
    if every_org or _DDL.match(sql) or _NAMED.search(sql):
        return
    read = {name for pair in _READS.findall(sql) for name in pair if name} & checked
    if read:
        raise OrgNotNamed(f"a statement reads {', '.join(sorted(read))} without naming its org: {sql.strip()[:300]}")
