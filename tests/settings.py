"""Test settings: the real settings, with var/ (SQLite, the embedded ClickHouse) in a temp dir per process."""

import os

from tests.scratch import scratch_dir

os.environ["LOOM_VAR_DIR"] = scratch_dir("loom-test-")
# A developer's shell settings must not change what tests see, nor send a test to a real provider or database.
HERMETIC_PREFIXES = ("LOOM_", "OPENAI_", "GEMINI_", "GOOGLE_", "ANTHROPIC_", "COHERE_", "DATABASE_URL")
for name in list(os.environ):
    if name.startswith(HERMETIC_PREFIXES) and name != "LOOM_VAR_DIR":
        del os.environ[name]

from loom_site.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
