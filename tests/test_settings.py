"""The suite is hermetic: a developer's exported keys and database never reach a test."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
