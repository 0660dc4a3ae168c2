"""Per-token rate limits: past its burst a token gets 429 RATE_LIMITED with Retry-After, until its bucket refills;
other tokens are not slowed; the threads and app processes of a host share one bucket per token."""

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.test import Client

from retrieval.errors import Refusal
from tenancy import limits

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _full_buckets():
    limits.forget()
    yield
    limits.forget()


def listed(client: Client, token: str):
    return client.post(
        "/v1/memory.list", data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_past_its_burst_a_token_waits_as_retry_after_says_and_others_do_not(backend, alice, settings):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 60, 3  # one a second
    busy, other, client = alice.token("viewer"), alice.token("viewer"), Client()
    assert [listed(client, busy).status_code for _ in range(3)] == [200, 200, 200]
    refused = listed(client, busy)
    error = json.loads(refused.content)["error"]
    assert (refused.status_code, error["code"], refused["Retry-After"]) == (429, "RATE_LIMITED", "1")
    assert 0 < error["retry_after"] <= 1 and "LOOM_RATE_LIMIT_PER_MINUTE" in error["message"]
    assert listed(client, other).status_code == 200  # another token's bucket
    deadline = time.monotonic() + 5
    while listed(client, busy).status_code == 429:  # refilled within its Retry-After
        assert time.monotonic() < deadline
        time.sleep(0.02)


def allowed(subject: str) -> bool:
    try:
        limits.check(subject)
        return True
    except Refusal:
        return False


def test_threads_share_a_tokens_bucket(settings):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 1, 10  # no refill to speak of
    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(allowed, ["token:shared"] * 40)) == 10


# Another app process of this host (a gunicorn worker): the same settings, the same var/ directory.
OTHER = """
import sys
from pathlib import Path
import django
django.setup()
from django.conf import settings
from retrieval.errors import Refusal
from tenancy import limits

settings.VAR_DIR = Path(sys.argv[1])
settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 1, 10
try:
    limits.check(sys.argv[2])
    print("allowed")
except Refusal:
    print("refused")
"""


def test_app_processes_share_a_tokens_bucket(settings):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 1, 10
    assert sum(allowed("token:everywhere") for _ in range(10)) == 10  # this process spends the burst...

    def other_process(subject: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", OTHER, str(settings.VAR_DIR), subject],
            cwd=ROOT,
            env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()

    assert other_process("token:everywhere") == "refused"  # ...and the other process finds it spent
    assert other_process("token:fresh") == "allowed"


def test_no_limit_when_switched_off(alice, settings, db):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 0, 1
    token, client = alice.token("viewer"), Client()
    assert {listed(client, token).status_code for _ in range(5)} == {200}
