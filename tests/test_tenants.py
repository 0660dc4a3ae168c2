"""retrieval/store/tenants.py: a statement that reads an org's rows names the org, or says it reads every org."""

import pytest

from retrieval.store import clickhouse, schema, tenants


def test_a_statement_reading_an_orgs_table_without_its_org_is_refused(backend):
    with pytest.raises(tenants.OrgNotNamed, match="memories"):
        clickhouse.query("SELECT memory_key FROM memories FINAL WHERE memory_key = {key:String}", {"key": "k"})
    with pytest.raises(tenants.OrgNotNamed, match="memory_embeddings"):  # a subquery's table too
        clickhouse.query_value(
            "SELECT count() FROM memories WHERE org = 'x' AND memory_key IN (SELECT memory_key FROM memory_embeddings)"
        )
    with pytest.raises(tenants.OrgNotNamed, match="memory_chunks"):  # a mutation rewrites rows: it names them too
        clickhouse.command("ALTER TABLE memory_chunks DELETE WHERE chunk_index > 1000000 SETTINGS mutations_sync = 1")


def test_a_statement_that_names_its_org_or_reads_every_org_on_purpose_runs(backend):
    named = "SELECT count() FROM memories WHERE org = {org:String}"
    assert clickhouse.query_value(named, {"org": "nobody"}) == 0
    several = "SELECT count() FROM memories WHERE org IN {orgs:Array(String)}"
    assert clickhouse.query_value(several, {"orgs": ["nobody", "no one"]}) == 0
    assert clickhouse.query_value("SELECT count() FROM memories WHERE org = ''", every_org=True) == 0
    assert clickhouse.query_value("SELECT 1") == 1  # a statement that reads no org's table needs no org


def test_the_tables_checked_are_the_engines_tables_with_an_org_column(backend):
    """The check reads the org-keyed tables off the migrations' DDL (it holds before they are applied): exactly the
    tables the engine holds with an `org` column (views aside: they store nothing)."""
    catalogue = clickhouse.query_rows(
        """
        SELECT c.table FROM system.columns AS c
        JOIN system.tables AS t ON t.database = c.database AND t.name = c.table
        WHERE c.database = {db:String} AND c.name = 'org' AND t.engine NOT IN ('MaterializedView', 'View')
        """,
        {"db": clickhouse.database()},
    )
    assert schema.org_keyed() == {table for (table,) in catalogue}
    assert {"memories", "memory_embeddings", "org_model_calls", "search_trace_log"} <= schema.org_keyed()
