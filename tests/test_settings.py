"""Settings: the suite is hermetic (a developer's exported keys and database never reach a test), and the table
docs/operating.md shows is the one the settings read."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loom_site import env
from retrieval import knobs

ROOT = Path(__file__).resolve().parent.parent
OPERATING = ROOT / "docs" / "operating.md"


def test_provider_keys_and_the_database_url_are_cleared_before_settings_load():
    exported = {
        "ANTHROPIC_API_KEY": "sk-ant-real",
        "COHERE_API_KEY": "co-real",
        "OPENAI_API_KEY": "sk-real",
        "GEMINI_API_KEY": "g-real",
        "DATABASE_URL": "postgres://prod/loom",
        "LOOM_LLM_MODEL": "claude-x",
    }
    probe = (
        "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'; django.setup();"
        "from django.conf import settings;"
        f"print(sorted(k for k in {sorted(exported)!r} if k in os.environ), settings.DATABASES['default']['ENGINE'],"
        "settings.LOOM_LLM_MODEL)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, **exported},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert shown[0] == "[]" and "sqlite3" in shown[1] and "claude" not in shown[-1]


def test_the_documented_table_is_the_one_the_settings_read():
    shown = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", OPERATING.read_text(), re.S)
    assert shown, "docs/operating.md lost its settings markers"
    assert shown.group(1) == env.markdown(), "the settings table is stale: paste `python -m loom_site.env` into it"


def test_every_setting_read_is_documented_here_or_is_a_ranking_knob():
    undocumented = {read.name for read in env.READS.values() if read.doc is None}
    assert undocumented == {knob.name for knob in knobs.SETTINGS}
    assert all(read.doc for read in env.READS.values() if read.doc is not None), "a setting documented as empty"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="BLAS has one thread on a one-core machine anyway")
@pytest.mark.parametrize("exported, threads", [({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")])
def test_the_app_holds_blas_to_one_thread_unless_the_operator_set_it(exported, threads):
    probe = (
        "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'; django.setup();"
        "from threadpoolctl import threadpool_info;"
        "print(*{lib['num_threads'] for lib in threadpool_info() if lib['user_api'] == 'blas'})"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**environ, **exported},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert shown == [threads]
