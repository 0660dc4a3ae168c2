"""The write path: memory.set and delete (`write`), the duplicate and conflict gates (`write_gates`), the
sensitivity detector, the texts beside the rows (`digests`: session summaries; `entities`: entity summaries), and
the background embedders (`embed_pending`, `reembed`), which work a namespace at a time (`passes`). May import `gates`, `providers`, `store` and `language`;
never `search`."""
