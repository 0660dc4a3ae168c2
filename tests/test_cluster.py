"""The cluster path (retrieval/store/cluster.py): tables sharded by (org, namespace) over two ClickHouse servers.

The ops themselves run on the cluster in the test files marked `cluster` (memory.set, get, delete, list,
timeline, search, ask, reembed, the write gates, the vector mirror, records, summaries); tests/test_processes.py
writes through one node and searches through the other. Here: where rows live and which shards a search reads.
"""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from loom_site import env
from retrieval.store import clickhouse, cluster, schema
from tests.conftest import Agent
from tests.test_vector_mirror import wait_for_mirror

on_cluster = pytest.mark.parametrize("backend", ["cluster"], indirect=True)

# The tables sharded by (org, namespace): a namespace's rows are on one shard only.
# (namespace_writes: a search reads its namespace's count each time, so a search always reads its shard.)
TENANT_TABLES = (
    "memories",
    "memory_embeddings",
    "memory_chunks",
    "memory_terms",
    "corpus_stats",
    "namespaces",
    "namespace_writes",
    "vector_cells",
)


def shard_of(org: str, namespace: str) -> int:
    """The shard (0 or 1) the Distributed tables send this namespace's rows to: sipHash64 modulo the shard count."""
    return clickhouse.query_value(
        "SELECT sipHash64({org:String}, {namespace:String}) % 2", {"org": org, "namespace": namespace}
    )


def namespaces_on_each_shard(org: str) -> list[str]:
    """A namespace name for shard 0 and one for shard 1."""
    found: dict[int, str] = {}
    for at in range(64):
        found.setdefault(shard_of(org, f"ns{at}"), f"ns{at}")
    return [found[0], found[1]]


def rows_on(node: str, org: str) -> dict[str, int]:
    """memories_local rows of this org on one node, by namespace."""
    with clickhouse.at(node):
        rows = clickhouse.query_rows(
            "SELECT namespace, count() FROM memories_local WHERE org = {org:String} GROUP BY namespace", {"org": org}
        )
    return dict(rows)


def tenant_reads_on(node: str, since, org: str) -> list[str]:
    """The statements another node sent this node since `since` that read a tenant table."""
    with clickhouse.at(node):
        clickhouse.command("SYSTEM FLUSH LOGS")
        return [
            row[0]
            for row in clickhouse.query_rows(
                """
                SELECT query FROM system.query_log
                WHERE type = 'QueryFinish' AND NOT is_initial_query AND event_time_microseconds >= {since:DateTime64(6)}
                  AND hasAny(tables, {tables:Array(String)}) AND position(query, {org:String}) > 0
                """,
                {"since": since, "tables": [f"loom.{cluster.local(t)}" for t in TENANT_TABLES], "org": org},
            )
        ]


@on_cluster
def test_a_namespaces_rows_live_on_its_shard_only(backend, alice, call, clickhouse_cluster):
    token = alice.token("admin")
    namespaces = namespaces_on_each_shard(alice.name)
    for namespace in namespaces:
        Agent(call, token, namespace).set(
            *[{"memory_key": f"k{i}", "value": f"fact {i} of {namespace}"} for i in range(3)]
        )
    first, second = (rows_on(node, alice.name) for node in clickhouse_cluster.urls)
    assert first == {namespaces[0]: 3} and second == {namespaces[1]: 3}
    for namespace in namespaces:  # and either node serves both
        assert Agent(call, token, namespace).hits("fact 1", min_similarity=0)[0] == "k1"


@on_cluster
def test_a_namespaces_search_reads_its_shard_only(backend, alice, call, clickhouse_cluster):
    """The app talks to the first node; a search of a namespace there sends the second node no tenant read, a search
    of a namespace on the second does."""
    token = alice.token("admin")
    here, there = (Agent(call, token, namespace) for namespace in namespaces_on_each_shard(alice.name))
    for agent in (here, there):
        agent.set({"memory_key": "offsite", "value": "the quarterly offsite is in lisbon"})
        wait_for_mirror(agent)  # its load's reads done, so the search below is all that runs
    second = clickhouse_cluster.urls[1]
    for agent, reads_second in ((here, False), (there, True)):
        with clickhouse.at(second):
            since = clickhouse.query_value("SELECT now64(6)")
        reply = agent.search("where is the offsite", explain=True)
        assert reply.json["hits"][0]["memory_key"] == "offsite"
        reads = tenant_reads_on(second, since, alice.name)
        assert bool(reads) is reads_second, "\n".join(reads)


@on_cluster
def test_a_supersede_replaces_the_old_version_on_its_shard(backend, agent):
    agent.set({"memory_key": "office", "value": "the office is in berlin"})
    agent.set({"memory_key": "office", "value": "the office moved to munich"})
    got = agent.call("memory.get", {"namespace": "default", "memory_key": "office"}, agent.token).json
    assert got["value"] == "the office moved to munich"
    hits = agent.search("where is the office", min_similarity=0, top_k=10).json["hits"]
    assert [hit["content_excerpt"] for hit in hits if hit["memory_key"] == "office"] == ["the office moved to munich"]


@on_cluster
def test_the_migrations_are_applied_on_every_node(backend, clickhouse_cluster):
    assert schema.apply() == []  # already applied, as recorded once for the cluster
    for node in clickhouse_cluster.urls:
        with clickhouse.at(node):
            tables = clickhouse.query_rows(
                "SELECT name, engine, create_table_query FROM system.tables WHERE database = 'loom'"
            )
        engines = {name: engine for name, engine, _ in tables}
        assert engines["memories"] == "Distributed" and engines["memories_local"] == "ReplacingMergeTree"
        assert engines["term_input_local"] == "Null" and engines["term_postings_mv"] == "MaterializedView"
        created = {name: query for name, _, query in tables}
        assert "merge_selector_base = 10" in created["memory_terms_local"]  # a local table's setting, on each node


@on_cluster
def test_with_keeper_the_ddl_goes_on_cluster_to_replicated_tables(backend, settings, snapshot):
    """Without LOOM_CLICKHOUSE_CLUSTER_NODES the migrations are written ON CLUSTER, once, to Replicated tables (the
    engine here has no Keeper to run them: the statements are compared as written)."""
    settings.LOOM_CLICKHOUSE_CLUSTER_NODES = []
    written = [
        statement
        for _, statements in schema.migrations()
        for ddl in statements
        for statement in cluster.statements(ddl)
    ]
    assert all(re.search(r" ON CLUSTER loom\b", statement) for statement in written)
    assert "\n\n".join(written) == snapshot


@pytest.mark.parametrize(
    ("cluster_name", "url", "nodes", "message"),
    [
        ("loom-prod", "http://ch:8123", [], "not a plain identifier"),
        ("loom", "", [], "needs LOOM_CLICKHOUSE_URL"),
        ("", "http://ch:8123", ["http://ch:8123"], "NODES needs LOOM_CLICKHOUSE_CLUSTER"),
    ],
)
def test_a_misconfigured_cluster_stops_the_boot_naming_the_setting(cluster_name, url, nodes, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        env.check_cluster(cluster_name, url, nodes)
