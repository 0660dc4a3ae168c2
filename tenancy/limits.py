"""Per-token rate limits: a token bucket per token, refilled at LOOM_RATE_LIMIT_PER_MINUTE and holding at most
LOOM_RATE_LIMIT_BURST requests, shared by the process's threads. An over-limit request is refused with 429
RATE_LIMITED and a Retry-After saying when the next one is allowed.

Several app processes (`make run WORKERS=4`) each allow their share, 1/LOOM_APP_PROCESSES of the rate and the
burst: gunicorn spreads requests over its workers, so a token's total stays near its limit with no store shared
between processes (a request would otherwise pay a round trip to one).
"""

import threading
import time

from django.conf import settings

from retrieval.errors import Refusal

_lock = threading.Lock()
_buckets: dict[str, tuple[float, float]] = {}  # token subject: (requests left, when counted)


def check(subject: str) -> None:
    """Count one request of this token; raises Refusal RATE_LIMITED when its bucket is empty."""
    per_minute = settings.LOOM_RATE_LIMIT_PER_MINUTE
    if not per_minute:
        return
    share = max(1, settings.LOOM_APP_PROCESSES)
    rate, burst = per_minute / 60 / share, max(1.0, settings.LOOM_RATE_LIMIT_BURST / share)
    now = time.monotonic()
    with _lock:
        left, counted = _buckets.get(subject, (burst, now))
        left = min(burst, left + (now - counted) * rate)
        if left < 1:
            _buckets[subject] = left, now
            wait = (1 - left) / rate
            raise Refusal(
                "RATE_LIMITED",
                f"this token's requests are over LOOM_RATE_LIMIT_PER_MINUTE ({per_minute:g} a minute, bursts of "
                f"{settings.LOOM_RATE_LIMIT_BURST:g}); retry in {wait:.1f} s",
                retry_after=round(wait, 1),
            )
        _buckets[subject] = left - 1, now


def forget() -> None:
    """Every bucket full again (tests)."""
    with _lock:
        _buckets.clear()
