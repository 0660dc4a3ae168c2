from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from loom_site.metrics import scrape
from mcp_server.http import endpoint as mcp_endpoint
from memories.views.admin import UnknownOp

urlpatterns = [
    path("", include("memories.urls")),
    path("", include("recall.urls")),
    path("v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("v1/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("v1/<path:op>", UnknownOp.as_view()),
    path("metrics", scrape, name="metrics"),
    path("mcp", mcp_endpoint, name="mcp"),
    path("admin/", admin.site.urls),
]
