"""The shared query-embedding cache in small granules. A lookup reads one key's row, but ClickHouse reads whole
granules, and with the default 8,192 rows a granule the table's 1.5 KB vectors made every lookup read up to ~10 MB:
9.8 ms a lookup at 30k cached queries, 5.5 ms with 64-row granules (bench/embedding_cache.py). A table's
granularity is fixed when it is created, so the table is made again; it holds only a cache, and a vector dropped
here is embedded again on its next miss."""

import importlib

# The table as 0004 made it (its DDL's comments say why its ORDER BY and TTL), with small granules.
_CREATED = importlib.import_module("retrieval.store.schema.0004_embedding_cache").STATEMENTS[0]

STATEMENTS = [
    # SYNC: a replicated table's Keeper path is freed at once, so the table can be made again at it.
    "DROP TABLE IF EXISTS embedding_cache SYNC",
    f"{_CREATED.rstrip()}\n    SETTINGS index_granularity = 64\n",
]
