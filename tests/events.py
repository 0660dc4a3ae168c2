"""Templated events a new user stores: deploys that differ only in service, version, person and date."""

from datetime import date, timedelta

SERVICES = ("web-app", "billing-service", "search-api", "auth-gateway")
PEOPLE = ("Jonas Berg", "Lena Fischer", "Amir Haddad", "Sofia Rossi", "Mei Tanaka")


def deploys(count: int = 40) -> list[dict]:
    """`count` deploy events, ten days apart from 2026-01-05: each a distinct fact, dated by valid_at."""
    events = []
    for i in range(count):
        service, person = SERVICES[i % len(SERVICES)], PEOPLE[(i * 3) % len(PEOPLE)]
        version = f"v{1 + i % 5}.{(i * 7) % 10}.{i % 4}"
        day = date(2026, 1, 5) + timedelta(days=10 * i)
        outcome = "rolled back" if i % 3 == 0 else "healthy"
        events.append(
            {
                "memory_key": f"deploy.{i:02d}",
                "value": f"{service} {version} deployed by {person} on {day.isoformat()}; {outcome}",
                "memory_type": "event",
                "valid_at": f"{day.isoformat()}T12:00:00Z",
            }
        )
    return events
