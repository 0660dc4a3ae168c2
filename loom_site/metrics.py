"""GET /metrics: the service's Prometheus metrics (retrieval/metrics.py), for a scraper holding LOOM_METRICS_TOKEN;
off (404) while that is unset."""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from retrieval import metrics


@require_GET
def scrape(request: HttpRequest) -> HttpResponse:
    expected = settings.LOOM_METRICS_TOKEN
    if not expected:
        return HttpResponse("metrics are off: set LOOM_METRICS_TOKEN\n", status=404, content_type="text/plain")
    sent = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(sent.encode(), expected.encode()):
        response = HttpResponse("send Authorization: Bearer <LOOM_METRICS_TOKEN>\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="loom-metrics"'
        return response
    return HttpResponse(generate_latest(metrics.REGISTRY), content_type=CONTENT_TYPE_LATEST)
