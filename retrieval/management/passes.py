"""The shape of a worker's command (embed_pending, extract_pending): one pass by default, or --loop; --org to
keep to one org; ClickHouse unreachable is a CommandError, not a traceback."""

import sys
import time

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from retrieval.store import clickhouse


class PassCommand(BaseCommand):
    noun, verb, idle = "rows", "did", "do"  # what a pass works on and does, for the progress bar and the last line
    batch_size = 100

    def add_arguments(self, parser):
        parser.add_argument("--org", help=f"only this org's {self.noun}")
        parser.add_argument(
            "--batch-size", type=int, default=self.batch_size, help=f"{self.noun} per pass (default {self.batch_size})"
        )
        parser.add_argument("--loop", action="store_true", help="keep going; sleep --interval when idle")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between idle passes (default 5)")

    def run_pass(self, batch_size: int, org: str | None) -> int:
        """One pass over at most `batch_size`: how many it did."""
        raise NotImplementedError

    def handle(self, *args, org=None, batch_size=None, loop=False, interval=5.0, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        total = 0
        try:
            with tqdm(unit=self.noun, file=sys.stderr, disable=None) as bar:  # (a bar on a terminal only)
                while True:
                    done = self.run_pass(batch_size, org)
                    total += done
                    bar.update(done)
                    if not loop:
                        break
                    if done < batch_size:
                        time.sleep(interval)
        except clickhouse.ClickHouseUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{self.verb} {total} {self.noun}" if total else f"nothing to {self.idle}")
