from retrieval.ingest import conversation
from retrieval.management.passes import PassCommand


class Command(PassCommand):
    help = (
        "Run the extraction queue's due jobs (deferred memory.set_from_messages, and extractions that failed and "
        "wait to be retried). One pass by default; --loop keeps going. With the embedded engine the server drains "
        "the queue itself; run this while it is stopped (one process owns the data)."
    )
    noun, verb, idle, batch_size = "jobs", "ran", "extract", 20

    def run_pass(self, batch_size, org):
        return conversation.run_due(batch_size, org)
