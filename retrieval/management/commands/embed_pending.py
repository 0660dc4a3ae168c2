import time

from django.core.management.base import BaseCommand, CommandError

from retrieval.ingest import embed_pending
from retrieval.store import clickhouse


class Command(BaseCommand):
    help = (
        "Embed rows stored with embedding stubs while their org's model calls were off. One pass by default; "
        "--loop keeps going. With the embedded engine, run it while the server is stopped (one process owns the data)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="only this org's rows")
        parser.add_argument("--batch-size", type=int, default=100, help="rows per pass (default 100)")
        parser.add_argument("--loop", action="store_true", help="keep embedding; sleep --interval when idle")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between idle passes (default 5)")

    def handle(self, *args, org=None, batch_size=100, loop=False, interval=5.0, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            while True:
                done = embed_pending.run_once(batch_size, org)
                if done:
                    self.stdout.write(f"embedded {done} rows")
                if not loop:
                    if not done:
                        self.stdout.write("nothing to embed")
                    return
                if done < batch_size:
                    time.sleep(interval)
        except clickhouse.ClickHouseUnavailable as exc:
            raise CommandError(str(exc)) from exc
