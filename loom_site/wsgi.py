import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
application = get_wsgi_application()

# Boot, in the server process: the embedder's real width is probed (health: embedding_dim_mismatch), and stubs are
# embedded here when no other process may open the data (the embedded engine: LOOM_EMBEDDING_WORKER), the
# embedder is recalibrated weekly (LOOM_RECALIBRATION_ENABLED), and question sets re-run (LOOM_EVAL_SCHEDULE).
import threading  # noqa: E402

from retrieval.evaluation import schedule  # noqa: E402 (needs the app registry)
from retrieval.gates import recalibration  # noqa: E402
from retrieval.ingest import embed_pending  # noqa: E402
from retrieval.providers import embedders  # noqa: E402

threading.Thread(target=embedders.probe_width, name="loom-width-probe", daemon=True).start()
embed_pending.start_worker()
recalibration.start_worker()
schedule.start_worker()
