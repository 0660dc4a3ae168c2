"""ClickHouse and what sits next to it: the one execution path (`clickhouse`), the numbered schema, a row's
identity (`rows`), the embedded engine's vector mirror, which rows a caller may read (`eligibility`), and the
plain reads (selectors) the API serves. May import `language`; knows nothing of models, writes or search."""
