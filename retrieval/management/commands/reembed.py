import sys

from django.core.management.base import BaseCommand, CommandError

from retrieval.ingest import reembed
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse


class Command(BaseCommand):
    help = (
        "Re-embed rows another model embedded with the served embedder (LOOM_EMBEDDING_MODEL), so search sees them. "
        "With the embedded engine, run it while the server is stopped (one process owns the data)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count the rows to re-embed, change nothing")
        parser.add_argument("--org", help="only this org")
        parser.add_argument("--namespace", help="only this namespace (with or without --org)")
        parser.add_argument("--batch-size", type=int, default=200, help="rows per batch (default 200)")
        parser.add_argument("--resume", metavar="TOKEN", help="continue after the batch a `resume:` line named")
        parser.add_argument(
            "--key-only",
            action="store_true",
            help="redo only the key vectors of rows the served model embedded (values keep theirs)",
        )
        parser.add_argument(
            "--delete-old",
            action="store_true",
            help="drop vectors of other models (refused while a row still lacks a served one)",
        )

    def handle(
        self,
        *args,
        dry_run=False,
        org=None,
        namespace=None,
        batch_size=200,
        resume=None,
        delete_old=False,
        key_only=False,
        **options,
    ):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        if key_only and delete_old:
            raise CommandError("--key-only and --delete-old do different work: run them apart")
        model = get_embedder().model_name
        try:
            if delete_old:
                try:
                    dropped = reembed.delete_old(org, namespace)
                except ValueError as exc:
                    raise CommandError(str(exc)) from exc
                self.stdout.write(f"dropped {dropped} vector rows of models other than {model}")
                return
            counts = [] if key_only else reembed.pending_counts(org, namespace)
            total = reembed.key_only_count(org, namespace) if key_only else sum(row["rows"] for row in counts)
            if dry_run:
                for row in counts:
                    self.stdout.write(
                        f"{row['org']}/{row['namespace']}: {row['rows']} rows of {row['embedding_model']}"
                    )
                self.stdout.write(f"{total} rows to re-embed with {model}{' (keys only)' if key_only else ''}")
                return
            progress = None
            for progress in reembed.run(org, namespace, batch_size, resume, key_only):
                self._bar(progress.done, total)
                self.stdout.write(f"resume: {progress.resume}")
            done = progress.done if progress else 0
            skipped = f"; {progress.skipped} held (model calls off or refused)" if progress and progress.skipped else ""
            self.stdout.write(f"re-embedded {done} rows with {model}{skipped}")
            if not key_only:
                texts = reembed.texts_beside(org, batch_size)
                self.stdout.write(f"re-embedded {texts} session and entity summaries with {model}")
        except clickhouse.ClickHouseUnavailable as exc:
            raise CommandError(str(exc)) from exc

    def _bar(self, done: int, total: int, width: int = 30) -> None:
        filled = width * done // total if total else width
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
