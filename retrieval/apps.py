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
