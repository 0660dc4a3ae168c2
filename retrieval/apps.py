import gc
import os

import numpy  # noqa: F401  (loaded here so that its BLAS is loaded when ready() limits it)
from django.apps import AppConfig
from django.db.models.signals import post_migrate
from threadpoolctl import threadpool_limits


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
        # numpy's BLAS on one thread (unless OPENBLAS_NUM_THREADS says otherwise): requests run on threads and
        # processes of their own, the embedded engine's inserts and merges hold cores, and a product split across
        # BLAS threads waits for them. A write's many small products (a batch against the gates' centroids) took
        # 28 ms a batch at 100k rows on two threads, 2.7 on one. The large scans that threads would speed are
        # simsimd's (retrieval/index/); what BLAS still does large (training the gates' cells,
        # checking the sign bits) runs in the background.
        if "OPENBLAS_NUM_THREADS" not in os.environ:
            threadpool_limits(limits=1, user_api="blas")
