import json
import uuid
from dataclasses import dataclass

import pytest
from django.test import Client

from retrieval import clickhouse, schema
from tenancy.models import ApiToken, Org
from tenancy.roles import Role
from tests.chserver import Server


@pytest.fixture(scope="session")
def clickhouse_server(tmp_path_factory):
    """A real ClickHouse HTTP server on a free loopback port, for the whole run."""
    server = Server(str(tmp_path_factory.mktemp("clickhouse-server")))
    yield server
    server.stop()


_migrated: set[str] = set()


@pytest.fixture(params=["embedded", "server"])
def backend(request):
    """Runs the test once on the embedded engine and once on the ClickHouse server."""
    dsn = None if request.param == "embedded" else request.getfixturevalue("clickhouse_server").url
    previous = clickhouse.use(dsn)
    if clickhouse.target() not in _migrated:
        schema.apply()
        _migrated.add(clickhouse.target())
    yield request.param
    clickhouse.use(previous)


@dataclass
class Reply:
    status: int
    json: dict

    @property
    def error(self) -> str | None:
        return self.json.get("error", {}).get("code")


class Tenant:
    """An org of its own (a fresh name per test, so no test sees another's rows) and its tokens."""

    def __init__(self, label: str):
        self.org = Org.objects.create(name=f"{label}-{uuid.uuid4().hex[:10]}")
        self.name = self.org.name

    def token(self, role: str = "writer", namespaces=()) -> str:
        return ApiToken.issue(self.org, Role.parse(role), namespaces)[1]


@pytest.fixture
def tenant(db):
    return Tenant


@pytest.fixture
def alice(db):
    return Tenant("alice")


@pytest.fixture
def bob(db):
    return Tenant("bob")


@pytest.fixture
def call(db):
    """call(op, body, token) -> Reply, through the full Django stack."""
    client = Client()

    def call(op: str, body=None, token: str | None = None, raw: bytes | None = None, method="post") -> Reply:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        if method == "get":
            response = client.get(f"/v1/{op}", **headers)
        else:
            payload = raw if raw is not None else json.dumps(body or {})
            response = getattr(client, method)(f"/v1/{op}", data=payload, content_type="application/json", **headers)
        return Reply(response.status_code, response.json())

    return call
