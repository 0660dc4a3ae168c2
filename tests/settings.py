"""Test settings: the real settings, with var/ (SQLite, the embedded ClickHouse) in a temp dir per process."""

import os
from tests.scratch import scratch_dir

os.environ["LOOM_VAR_DIR"] = scratch_dir("loom-test-")
for name in list(os.environ):
    if name.startswith(("LOOM_", "OPENAI_", "GEMINI_", "GOOGLE_")) and name != "LOOM_VAR_DIR":
        del os.environ[name]  # a developer's shell settings must not change what tests see

from loom_site.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
