from django.urls import path

from memories.views import admin, reads, search, writes

# In the order /v1/docs lists them, and in which their schema examples succeed when sent one after another.
OPS = [
    writes.MemorySet,
    reads.MemoryGet,
    reads.MemoryBulkGet,
    reads.MemoryList,
    reads.MemoryTimeline,
    reads.MemoryRelated,
    writes.MemorySetFromMessages,
    reads.MemoryRecall,
    writes.ExtractionList,
    writes.ExtractionRetry,
    search.MemorySearch,
    search.SearchQuery,
    search.ContextPack,
    search.MemoryAsk,
    search.MemoryBrief,
    search.MemorySearchTrace,
    search.MemorySearchTraceLog,
    writes.MemoryOutcome,
    writes.MemoryDelete,
    writes.SessionSummarySet,
    writes.SessionSummaryDelete,
    writes.EntitySummarySet,
    writes.EntitySummaryDelete,
    writes.RecordSet,
    writes.RecordDelete,
    admin.NamespaceRegister,
    admin.CalibrationGet,
    admin.CalibrationRun,
    admin.EvalSetUpload,
    admin.EvalSetList,
    admin.EvalRun,
    admin.EvalRunGet,
    admin.EvalRunList,
    admin.OrgSetModelCalls,
    admin.OrgGetModelCalls,
    admin.AuditList,
]

urlpatterns = [path(f"v1/{view.op}", view.as_view()) for view in OPS] + [
    path("v1/health", admin.Health.as_view()),
]
