from django.contrib.auth import views as auth
from django.urls import path, re_path

from recall import evaluation, views

app_name = "recall"
urlpatterns = [
    path("recall", views.lab, name="lab"),
    # Dashboard users need not be staff, so the Lab has its own login (the admin's admits staff only).
    path("recall/login", auth.LoginView.as_view(template_name="recall/login.html"), name="login"),
    path("recall/logout", auth.LogoutView.as_view(next_page="recall:login"), name="logout"),
    path("recall/compare", views.compare, name="compare"),
    path("recall/orgs", views.orgs, name="orgs"),
    path("recall/calibration", views.calibration_page, name="calibration"),
    path("recall/audit", views.audit_page, name="audit"),
    path("recall/traces", views.traces, name="traces"),
    path("recall/memories", views.memories, name="memories"),
    path("recall/conversations", views.conversations, name="conversations"),
    path("recall/memories/<path:memory_key>", views.memory, name="memory"),
    path("recall/traces/<str:trace_id>", views.trace_detail, name="trace"),
    path("recall/evaluate", evaluation.evaluate, name="evaluate"),
    path("recall/evaluate/from-trace", evaluation.from_trace, name="eval_from_trace"),
    re_path(r"^recall/evaluate/(?P<run_id>[\w-]+)\.(?P<fmt>json|csv)$", evaluation.run_export, name="eval_export"),
    path("recall/evaluate/<str:run_id>", evaluation.run_page, name="eval_run"),
]
