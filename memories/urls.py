from django.urls import path

from memories import views

# In the order /v1/docs lists them, and in which their schema examples succeed when sent one after another.
OPS = [
    views.MemorySet,
    views.MemoryGet,
    views.MemoryBulkGet,
    views.MemoryList,
    views.MemoryTimeline,
    views.MemoryRelated,
    views.MemorySetFromMessages,
    views.MemoryRecall,
    views.ExtractionList,
    views.ExtractionRetry,
    views.MemorySearch,
    views.SearchQuery,
    views.ContextPack,
    views.MemoryAsk,
    views.MemoryBrief,
    views.MemorySearchTrace,
    views.MemorySearchTraceLog,
    views.MemoryOutcome,
    views.MemoryDelete,
    views.SessionSummarySet,
    views.SessionSummaryDelete,
    views.EntitySummarySet,
    views.EntitySummaryDelete,
    views.RecordSet,
    views.RecordDelete,
    views.NamespaceRegister,
    views.CalibrationGet,
    views.CalibrationRun,
    views.EvalSetUpload,
    views.EvalSetList,
    views.EvalRun,
    views.EvalRunGet,
    views.EvalRunList,
    views.OrgSetModelCalls,
    views.OrgGetModelCalls,
    views.AuditList,
]

urlpatterns = [path(f"v1/{view.op}", view.as_view()) for view in OPS] + [
    path("v1/health", views.Health.as_view()),
]
