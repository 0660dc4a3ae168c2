"""Per-token rate limits: a token bucket per token, refilled at LOOM_RATE_LIMIT_PER_MINUTE and holding at most
LOOM_RATE_LIMIT_BURST requests. An over-limit request is refused with 429 RATE_LIMITED and a Retry-After saying
when the next one is allowed.

The buckets are shared by every thread and every app process of this host (`make run WORKERS=4`): they live in
one SQLite file under LOOM_VAR_DIR, each request a locked read-and-write of its token's row (tens of
microseconds; not durable, as a limit need not survive a crash). App processes on several hosts each count
their own.
"""

import sqlite3
import threading
import time

from django.conf import settings

from retrieval.errors import Refusal

_local = threading.local()  # a connection per thread (and so per process: made after a server forks)


def _buckets() -> sqlite3.Connection:
    path = settings.VAR_DIR / "rate_limits.sqlite3"
    if getattr(_local, "path", None) != path:
        db = sqlite3.connect(path, timeout=5, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE IF NOT EXISTS buckets (subject TEXT PRIMARY KEY, left REAL, counted REAL)")
        _local.db, _local.path = db, path
    return _local.db


def check(subject: str) -> None:
    """Count one request of this token; raises Refusal RATE_LIMITED when its bucket is empty."""
    per_minute = settings.LOOM_RATE_LIMIT_PER_MINUTE
    if not per_minute:
        return
    rate, burst = per_minute / 60, settings.LOOM_RATE_LIMIT_BURST
    db = _buckets()
    db.execute("BEGIN IMMEDIATE")  # the row's read and write as one, whichever process comes next
    try:
        now = time.time()  # wall time: the processes share it, not a monotonic clock
        row = db.execute("SELECT left, counted FROM buckets WHERE subject = ?", (subject,)).fetchone()
        left, counted = row or (burst, now)
        left = min(burst, left + max(0.0, now - counted) * rate)
        allowed = left >= 1
        db.execute(
            "INSERT OR REPLACE INTO buckets (subject, left, counted) VALUES (?, ?, ?)",
            (subject, left - 1 if allowed else left, now),
        )
    finally:
        db.execute("COMMIT")
    if not allowed:
        wait = (1 - left) / rate
        raise Refusal(
            "RATE_LIMITED",
            f"this token's requests are over LOOM_RATE_LIMIT_PER_MINUTE ({per_minute:g} a minute, bursts of "
            f"{burst:g}); retry in {wait:.1f} s",
            retry_after=round(wait, 1),
        )


def forget() -> None:
    """Every bucket full again (tests)."""
    _buckets().execute("DELETE FROM buckets")
