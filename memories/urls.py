from django.urls import path

from memories import views

OPS = [
    views.MemorySet,
    views.MemoryGet,
    views.MemoryBulkGet,
    views.MemoryList,
    views.MemoryDelete,
    views.SessionSummarySet,
    views.SessionSummaryDelete,
    views.EntitySummarySet,
    views.EntitySummaryDelete,
    views.RecordSet,
    views.RecordDelete,
    views.MemoryTimeline,
    views.MemoryRelated,
    views.NamespaceRegister,
    views.MemorySearch,
    views.MemoryAsk,
    views.MemorySearchTrace,
    views.MemorySearchTraceLog,
    views.MemoryOutcome,
    views.CalibrationGet,
    views.CalibrationRun,
    views.OrgSetModelCalls,
    views.OrgGetModelCalls,
    views.AuditList,
]

urlpatterns = [path(f"v1/{view.op}", view.as_view()) for view in OPS] + [
    path("v1/health", views.Health.as_view()),
]
