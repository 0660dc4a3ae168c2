import json
import threading
import uuid
from dataclasses import dataclass

import pytest
from django.test import Client

from retrieval import caching
from retrieval.evaluation import runs
from retrieval.store import clickhouse, cluster, schema, tenants
from tenancy.models import ApiToken, Org
from tenancy.roles import Role
from tests.chserver import Cluster, Server


@pytest.fixture(scope="session")
def clickhouse_server(tmp_path_factory):
    """A real ClickHouse HTTP server on a free loopback port, for the whole run."""
    server = Server(str(tmp_path_factory.mktemp("clickhouse-server")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def clickhouse_cluster(tmp_path_factory):
    """Two ClickHouse servers, each a shard of the cluster "loom", for the whole run."""
    cluster = Cluster(str(tmp_path_factory.mktemp("clickhouse-cluster")))
    yield cluster
    cluster.stop()


_migrated: set[str] = set()


def pytest_generate_tests(metafunc):
    """A test that uses `backend` runs once on the embedded engine and once on the ClickHouse server; marked
    `cluster`, also on a two-shard cluster (retrieval/store/cluster.py). A test may name its own backends
    (`@pytest.mark.parametrize("backend", ["server"], indirect=True)`)."""
    named = any("backend" in marker.args[0] for marker in metafunc.definition.iter_markers("parametrize"))
    if "backend" in metafunc.fixturenames and not named:
        cluster = metafunc.definition.get_closest_marker("cluster") is not None
        metafunc.parametrize("backend", ["embedded", "server"] + ["cluster"] * cluster, indirect=True)


@pytest.fixture
def backend(request):
    """The engine the test runs on (see pytest_generate_tests): embedded, server, or cluster."""
    dsn = None
    if request.param == "server":
        dsn = request.getfixturevalue("clickhouse_server").url
    elif request.param == "cluster":
        nodes = request.getfixturevalue("clickhouse_cluster").urls
        settings = request.getfixturevalue("settings")
        settings.LOOM_CLICKHOUSE_CLUSTER, settings.LOOM_CLICKHOUSE_CLUSTER_NODES = "loom", nodes
        dsn = nodes[0]
    previous = clickhouse.use(dsn)
    if clickhouse.target() not in _migrated:
        schema.apply()
        _migrated.add(clickhouse.target())
    yield request.param
    clickhouse.flush_later()  # the test's usage rows reach its engine while it still runs (the server may stop next)
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

    def token(self, role: str = "writer", namespaces=(), read_scope: str = "") -> str:
        return ApiToken.issue(self.org, Role.parse(role), namespaces, read_scope=read_scope)[1]


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
    """call(op, body, token) -> Reply, through the full Django stack (from any thread: each its own client)."""
    clients = threading.local()

    def call(op: str, body=None, token: str | None = None, raw: bytes | None = None, method="post") -> Reply:
        client = clients.__dict__.setdefault("client", Client())
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        if method == "get":
            response = client.get(f"/v1/{op}", **headers)
        else:
            payload = raw if raw is not None else json.dumps(body or {})
            response = getattr(client, method)(f"/v1/{op}", data=payload, content_type="application/json", **headers)
        return Reply(response.status_code, response.json())

    return call


@pytest.fixture
def health(alice, call):
    """health() -> GET /v1/health as an admin sees it: what stands behind `status`."""
    token = alice.token("admin")
    return lambda: call("health", token=token, method="get").json


class Agent:
    """One token's view of the API, for tests that write then search."""

    def __init__(self, call, token: str, namespace: str = "default"):
        self.call, self.token, self.namespace = call, token, namespace

    def set(self, *items: dict, **common) -> Reply:
        body = {"namespace": self.namespace, "items": [dict(item) for item in items], **common}
        reply = self.call("memory.set", body, self.token)
        assert reply.status in (200, 201), reply.json
        return reply

    def search(self, query: str, **fields) -> Reply:
        return self.call("memory.search", {"namespace": self.namespace, "query": query, **fields}, self.token)

    def hits(self, query: str, **fields) -> list[str]:
        reply = self.search(query, **fields)
        assert reply.status == 200, reply.json
        return [hit["memory_key"] for hit in reply.json["hits"]]


@pytest.fixture
def agent(alice, call):
    """An admin of a fresh org, searching namespace 'default' (on the backend the test runs on)."""
    return Agent(call, alice.token("admin"))


@pytest.fixture
def ranker(agent, settings):
    """An agent whose namespace has no similarity floor, so the ranking alone orders the window, and whose writes
    skip the write gates, so near-identical rows stay apart for the rank terms to order."""
    settings.LOOM_WRITE_GATES = False
    reply = agent.call(
        "namespace.register", {"namespace": agent.namespace, "retrieval_defaults": {"min_similarity": 0}}, agent.token
    )
    assert reply.status in (200, 201), reply.json
    return agent


@pytest.fixture
def model_server():
    """An OpenAI-speaking provider on a free loopback port, for one test."""
    from tests.model_server import ModelServer

    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def openai_embedder(model_server, settings):
    """The process embeds with text-embedding-3-small through the real openai SDK, against `model_server`."""
    from retrieval.providers import embedders

    settings.LOOM_EMBEDDING_MODEL = "text-embedding-3-small"
    settings.LOOM_EMBEDDING_DIM = 64
    settings.OPENAI_API_KEY = "sk-test-key"
    settings.OPENAI_BASE_URL = model_server.url
    settings.LOOM_EMBEDDING_RETRY_MAX_WAIT_S = 0  # back off, but do not sleep the suite
    settings.LOOM_ADAPTIVE_THRESHOLDS = False  # no boot probe among the requests these tests count
    embedders.get_embedder.cache_clear()
    yield embedders.get_embedder().inner  # the provider itself; ops reach it through the switch
    embedders.get_embedder.cache_clear()


@pytest.fixture
def local_embedder(backend, settings):
    """The process embeds with the real local model (all-MiniLM-L6-v2, offline), with no calibration stored yet."""
    from retrieval.gates import thresholds
    from retrieval.providers import embedders

    settings.LOOM_EMBEDDING_MODEL = "local"
    embedders.get_embedder.cache_clear()
    cluster.run("TRUNCATE TABLE embedder_calibration")
    cluster.run("TRUNCATE TABLE namespace_calibration_result")
    cluster.run("TRUNCATE TABLE namespace_calibration_pairs")  # an earlier test's namespace would be probed again
    caching.forget_all()
    thresholds._probed_at.clear()
    yield embedders.get_embedder()
    caching.forget_all()
    embedders.get_embedder.cache_clear()


def _serving_llm(settings, model: str, **keys):
    """The process's LLM is `model` (with these key and URL settings), built afresh, forgotten after the test."""
    from retrieval.providers import llm

    settings.LOOM_LLM_MODEL = model
    for name, value in keys.items():
        setattr(settings, name, value)
    settings.LOOM_LLM_RETRY_MAX_WAIT_S = 0
    llm.forget()
    yield llm.get_llm
    llm.forget()


@pytest.fixture
def openai_llm(model_server, settings):
    """The process's LLM is gpt-test through the real openai SDK, against `model_server`."""
    yield from _serving_llm(settings, "gpt-test", OPENAI_API_KEY="sk-test-key", OPENAI_BASE_URL=model_server.url)


@pytest.fixture
def anthropic_llm(model_server, settings):
    """The process's LLM is claude-test through the real anthropic SDK, against `model_server`."""
    yield from _serving_llm(
        settings,
        "claude-test",
        ANTHROPIC_API_KEY="sk-ant-test-key",
        ANTHROPIC_BASE_URL=model_server.url.removesuffix("/v1"),
    )  # the SDK adds /v1/messages


@pytest.fixture(autouse=True)
def _no_provider_failures_from_earlier_tests():
    """Health reports a provider's last failure; each test starts with none."""
    from retrieval.providers import remote

    remote._failing.clear()


@pytest.fixture(autouse=True)
def _no_provider_built_for_an_earlier_test():
    """Each test's embedder and LLM are built from its own settings: a thread still serving an earlier test (a live
    server's, a background worker's) may have built one from that test's settings after it forgot its own (CI once
    ran a test against an LLM on a model server that had stopped)."""
    from retrieval.providers import embedders, llm

    embedders.get_embedder.cache_clear()
    llm.forget()


@pytest.fixture(autouse=True)
def _no_identity_held_by_earlier_tests():
    """A gateway's refusal holds a job's calls for that identity; each test starts with none held."""
    from retrieval.providers import customer

    customer.forget_holds()


@pytest.fixture(autouse=True)
def _no_evaluation_run_outlives_its_test():
    """A run an op started in the background ends within the test, on the engine the test gave it."""
    yield
    runs.join(timeout=60)


@pytest.fixture(autouse=True)
def _no_mirror_load_outlives_its_test(settings):
    """A mirror load a test started ends within the test (before its settings are restored, which a load reads)."""
    import time

    from retrieval import index

    yield
    deadline = time.monotonic() + 30
    while index.loading() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _no_copies_from_earlier_tests():
    """Each test reads namespace configs, gates and noise levels afresh, not an earlier test's copies."""
    caching.forget_all()


@pytest.fixture(autouse=True)
def _no_stored_cells_training_outlives_its_test(settings, monkeypatch):
    """A training of stored cells a batch began (retrieval/index/stored_cells.py) settles in half a second (a batch
    that listed the older version reads it meanwhile), and ends within its test (before its settings are restored)."""
    import time

    from retrieval.index import stored_cells, stored_training

    monkeypatch.setattr(stored_training, "SETTLE_S", 0.5)
    yield
    deadline = time.monotonic() + 30
    while stored_training.training() and time.monotonic() < deadline:
        time.sleep(0.01)
    stored_cells.forget()


@pytest.fixture(autouse=True, scope="session")
def _every_statement_names_its_org():
    """A statement that reads an org's table without naming the org fails its test (retrieval/store/tenants.py)."""
    tenants.checked = schema.org_keyed()
    yield
    tenants.checked = frozenset()
