from retrieval.ingest import embed_pending
from retrieval.management.passes import PassCommand


class Command(PassCommand):
    help = (
        "Embed rows stored with embedding stubs while their org's model calls were off. One pass by default; "
        "--loop keeps going. With the embedded engine, run it while the server is stopped (one process owns the data)."
    )
    noun, verb, idle = "rows", "embedded", "embed"

    def run_pass(self, batch_size, org):
        return embed_pending.run_once(batch_size, org)
