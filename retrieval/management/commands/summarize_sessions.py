from django.core.management.base import BaseCommand

from retrieval.ingest import digests
from retrieval.providers import llm


class Command(BaseCommand):
    help = (
        "Write a session digest, with the configured LLM, for each session that has live rows and no digest "
        "(metered to its org, its model-call switch checked). With no LLM configured nothing is written: a digest "
        "is never invented. With the embedded engine, run it while the server is stopped."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="only this org's sessions")
        parser.add_argument("--namespace", help="only this namespace's sessions")
        parser.add_argument("--limit", type=int, default=100, help="at most this many sessions (default 100)")

    def handle(self, *args, org=None, namespace=None, limit=100, **options):
        if llm.get_llm().provider == "fake":
            self.stderr.write("no LLM is configured (LOOM_LLM_MODEL and its key): no digest written")
            return
        done = digests.summarize_sessions(org, namespace, limit)
        self.stdout.write(f"{done.written} session digests written")
        if done.held:
            self.stderr.write(f"{done.held} sessions held: their org's model calls are off or refused")
