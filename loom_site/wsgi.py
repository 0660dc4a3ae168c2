import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
application = get_wsgi_application()

# Boot, in the server process: the embedder is calibrated if it never was (the boot probe: the first search judges
# by its gates, not the scalars), its real width is probed (health: embedding_dim_mismatch), and stubs are
# embedded here when no other process may open the data (the embedded engine: LOOM_EMBEDDING_WORKER), the
# embedder is recalibrated weekly (LOOM_RECALIBRATION_ENABLED), question sets re-run (LOOM_EVAL_SCHEDULE), and the
# vector mirrors of the namespaces written most recently loaded (LOOM_VECTOR_MIRROR_WARM).
import threading  # noqa: E402

from retrieval import index  # noqa: E402 (needs the app registry)
from retrieval.evaluation import schedule  # noqa: E402
from retrieval.gates import recalibration, thresholds  # noqa: E402
from retrieval.ingest import embed_pending  # noqa: E402
from retrieval.providers import embedders  # noqa: E402
from retrieval.search import key_axis  # noqa: E402
from retrieval.store import clickhouse  # noqa: E402


def _warm_mirrors() -> None:
    try:
        index.warm(embedders.get_embedder().model_name, key_axis.enabled)
    finally:
        clickhouse.release_thread()


thresholds.probe_at_boot()
threading.Thread(target=embedders.probe_width, name="loom-width-probe", daemon=True).start()
embed_pending.start_worker()
recalibration.start_worker()
schedule.start_worker()
threading.Thread(target=_warm_mirrors, name="loom-mirror-warm", daemon=True).start()
