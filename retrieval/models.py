# Memory data lives in ClickHouse (retrieval/store/schema/), never in Django's database.
# This module exists so Django sends this app its post_migrate signal.
