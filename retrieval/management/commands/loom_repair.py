from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from retrieval.ingest import repair
from retrieval.store import clickhouse


class Command(BaseCommand):
    help = (
        "Retire the side rows (vectors, chunks, entity rows, terms) of writes that failed before their memories row "
        "was stored. Run one at a time (cron, or by hand after an outage); with the embedded engine, while the "
        "server is stopped (one process owns the data)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="only this org's rows")
        parser.add_argument(
            "--grace-minutes",
            type=float,
            default=repair.grace().total_seconds() / 60,
            help="leave rows younger than this: a write may still be storing them (default LOOM_REPAIR_GRACE_S)",
        )

    def handle(self, *args, org=None, grace_minutes=None, **options):
        if grace_minutes < 0:
            raise CommandError("--grace-minutes must be 0 or more")
        try:
            swept = repair.sweep(timedelta(minutes=grace_minutes), org)
        except clickhouse.ClickHouseUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"swept {swept} row versions a failed write left behind" if swept else "nothing to sweep")
