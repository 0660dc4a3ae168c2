"""Per-token rate limits: past its burst a token gets 429 RATE_LIMITED with Retry-After, until its bucket refills;
other tokens are not slowed; the process's threads share one bucket per token."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.test import Client

from retrieval.errors import Refusal
from tenancy import limits


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


def test_threads_share_a_tokens_bucket_and_processes_split_it(settings):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 1, 10  # no refill to speak of

    def allowed(subject: str) -> bool:
        try:
            limits.check(subject)
            return True
        except Refusal:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(allowed, ["token:shared"] * 40)) == 10
    settings.LOOM_APP_PROCESSES = 2  # each of two workers allows half
    assert sum(allowed("token:split") for _ in range(10)) == 5


def test_no_limit_when_switched_off(alice, settings, db):
    settings.LOOM_RATE_LIMIT_PER_MINUTE, settings.LOOM_RATE_LIMIT_BURST = 0, 1
    token, client = alice.token("viewer"), Client()
    assert {listed(client, token).status_code for _ in range(5)} == {200}
