"""numpy's default BLAS threads, for the baselines: the app holds BLAS to one thread (retrieval/apps.py), and a
baseline is numpy at its best."""

import os

from threadpoolctl import threadpool_limits


def numpy_default_threads() -> threadpool_limits:
    """`with numpy_default_threads():` BLAS on every core until the block ends."""
    return threadpool_limits(limits=os.cpu_count(), user_api="blas")
