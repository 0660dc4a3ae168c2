from retrieval.ingest import extraction_pass
from retrieval.management.passes import PassCommand


class Command(PassCommand):
    help = (
        "Run the extraction queue's due jobs (deferred memory.set_from_messages, extractions that failed and "
        "wait to be retried, the entity extractor's and the conflict resolver's). One pass by default; --loop keeps going. With the embedded engine the server drains "
        "the queue itself; run this while it is stopped (one process owns the data)."
    )
    noun, verb, idle, batch_size = "jobs", "ran", "extract", 20

    def run_pass(self, batch_size, org):
        return extraction_pass.run_due(batch_size, org)
