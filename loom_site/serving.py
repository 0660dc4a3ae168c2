"""gunicorn's hooks for `make run` (`gunicorn --config python:loom_site.serving`)."""

from django.conf import settings

from retrieval import cores

# No control socket: gunicorn's default is $HOME/.gunicorn/gunicorn.ctl, which a second instance on the host takes
# over and the first to exit removes.
control_socket_disable = True


def post_worker_init(worker) -> None:
    """The worker's app is loaded: from here on its request threads run Python on one CPU, each worker on another
    (LOOM_PIN_PYTHON_THREADS, retrieval/cores.py)."""
    if settings.LOOM_PIN_PYTHON_THREADS:
        cores.pin(worker.age)
