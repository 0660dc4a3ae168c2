import gc

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _apply_clickhouse_schema(sender, verbosity=1, stdout=None, **kwargs):
    from retrieval.store import clickhouse, schema

    ran = schema.apply()
    if verbosity and stdout is not None:
        where = f"{clickhouse.backend()} ClickHouse, database {clickhouse.database()}"
        stdout.write(f"ClickHouse schema ({where}): " + (", ".join(ran) if ran else "up to date"))


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = "Retrieval"

    def ready(self):
        # `manage.py migrate` applies the ClickHouse migrations after Django's.
        post_migrate.connect(_apply_clickhouse_schema, sender=self, dispatch_uid="loom-clickhouse-schema")
        # A write batch allocates thousands of containers that die with it; at the collector's default threshold (700
        # allocations) they lived through young collections, were promoted, and brought a full collection (which walks
        # every vector mirror's row ids) every ~14 batches: ~23 ms a batch at 120k-250k rows, ~3 ms with this one
        # (docs/benchmarks.md).
        gc.set_threshold(50_000, 20, 10)
