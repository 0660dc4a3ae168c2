from django.urls import path

from recall import views

app_name = "recall"
urlpatterns = [
    path("recall", views.lab, name="lab"),
    path("recall/compare", views.compare, name="compare"),
    path("recall/orgs", views.orgs, name="orgs"),
    path("recall/calibration", views.calibration_page, name="calibration"),
    path("recall/traces", views.traces, name="traces"),
    path("recall/memories", views.memories, name="memories"),
    path("recall/memories/<path:memory_key>", views.memory, name="memory"),
    path("recall/traces/<str:trace_id>", views.trace_detail, name="trace"),
]
