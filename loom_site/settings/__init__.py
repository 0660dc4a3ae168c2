"""Django settings for Loom Recall, a module per concern.

Every deployment setting is read once, from the environment (strictly: loom_site/env.py), in this order, which is
the order of docs/operating.md's table of them.
"""

# isort: off
from loom_site.settings.site import *  # noqa: F403
from loom_site.settings.clickhouse import *  # noqa: F403
from loom_site.settings.requests import *  # noqa: F403
from loom_site.settings.providers import *  # noqa: F403
from loom_site.settings.search import *  # noqa: F403
