from django.core.management.base import BaseCommand, CommandError

from retrieval import caching
from retrieval.gates import calibration, thresholds
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse


class Command(BaseCommand):
    help = (
        "Probe the live embedder with the built-in corpora now and publish its gates as the cluster calibration "
        "(warns when a gate moves by 0.05 or more), then each namespace's kept calibration.run pairs. With the embedded engine, run it while the server is stopped."
    )

    def handle(self, *args, **options):
        embedder = get_embedder()
        if not thresholds.adaptive(embedder.model_name):
            raise CommandError(
                f"{embedder.model_name} is not calibrated: fake embedders and LOOM_ADAPTIVE_THRESHOLDS=false "
                "use the scalar gates"
            )
        try:
            fresh, previous, drift = calibration.recalibrate(embedder)
            probed, held = calibration.reprobe_namespaces(embedder)
        except clickhouse.ClickHouseUnavailable as exc:
            raise CommandError(str(exc)) from exc
        caching.forget_all()
        self.stdout.write(f"{embedder.model_name}: calibration {fresh.calibration_hash}")
        for name in calibration.GATES:
            was = f" (was {previous.gates[name]:.4f})" if previous else ""
            self.stdout.write(f"  {name:<15} {fresh.gates[name]:.4f}{was}")
        self.stdout.write(f"namespaces probed again from their calibration pairs: {probed} ({held} held)")
        if drift >= calibration.DRIFT_WARNING:
            self.stderr.write(f"warning: a gate moved by {drift:.3f} since the last calibration; re-bench recall")
