"""Text alone, no I/O: lexical terms and stems, a query's shape (dates, identifiers), the names a text is about,
sentences and chunks. Imports nothing else of retrieval's but the shared modules."""
