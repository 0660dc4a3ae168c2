"""The execution path: typed parameter binding, the schema ledger, and clear failures."""

import subprocess
import sys

from retrieval import clickhouse, schema


def test_values_are_bound_not_formatted(backend):
    hostile = "x') OR 1=1; DROP TABLE memories; --"
    assert clickhouse.query_value("SELECT {v:String}", {"v": hostile}) == hostile
    rows = clickhouse.query(
        "SELECT count() AS n FROM memories WHERE org = {org:String}", {"org": hostile}
    )
    assert rows == [{"n": 0}]
    assert clickhouse.query_value("SELECT count() FROM system.tables WHERE name = 'memories'") >= 1


def test_schema_apply_is_idempotent_and_recorded(backend):
    assert schema.apply() == []
    names = [name for name, _ in schema.migrations()]
    assert names[0] == "0001_memories"
    assert set(names) <= schema.applied()


def test_a_second_process_on_the_same_data_directory_is_told_why(tmp_path):
    """The embedded engine allows one process per directory: the second gets a clear error, not a hang."""
    from django.conf import settings

    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'loom_site.settings'; django.setup()\n"
        "from retrieval import clickhouse\n"
        "try:\n    clickhouse.ping()\nexcept clickhouse.ClickHouseUnavailable as exc:\n    print('REFUSED', exc)\n"
    )
    clickhouse.ping()  # this process holds the directory
    env = {"PATH": "/usr/bin:/bin", "LOOM_VAR_DIR": str(tmp_path), "LOOM_DATA_DIR": settings.LOOM_DATA_DIR}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "REFUSED" in done.stdout, done.stderr[-2000:]
    assert "in use by another process" in done.stdout
