"""Model calls: embedders, LLMs and rerankers behind one gateway (`remote`), the org's model-call switch and
metering (`customer`), their caches and one price table (`costs`). May import `store` and `language`."""
