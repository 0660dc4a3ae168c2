import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
application = get_wsgi_application()

# The server process embeds stubs itself when no other process may (the embedded engine: LOOM_EMBEDDING_WORKER).
from retrieval import embed_pending  # noqa: E402 (needs the app registry)

embed_pending.start_worker()
