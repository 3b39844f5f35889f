from django.urls import path

from controlplane.web import (
    approval_views,
    audit_views,
    channel_views,
    gateway_views,
    memory_views,
    policy_views,
    proposal_views,
    repair_views,
    views,
)

app_name = "web"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("workers/<int:worker_id>/", views.worker_detail, name="worker"),
    path("workers/<int:worker_id>/policy/", policy_views.worker_policy, name="worker-policy"),
    path("runs/<int:run_id>/", views.run_timeline, name="run"),
    path("runs/<int:run_id>/answers/", views.run_answers, name="run-answers"),
    path("runs/<int:run_id>/repair/forget-notes/", repair_views.run_forget_notes_view,
         name="run-forget-notes"),
    path("runs/<int:run_id>/repair/requeue/", repair_views.run_requeue_view, name="run-requeue"),
    path("runs/<int:run_id>/repair/revert-knowledge/", repair_views.run_revert_knowledge_view,
         name="run-revert-knowledge"),
    path("memory/", memory_views.memory_list, name="memory"),
    path("memory/person/<str:person>/", memory_views.memory_person, name="memory-person"),
    path("memory/person/<str:person>/forget/", memory_views.person_forget_view, name="memory-person-forget"),
    path("memory/notes/<int:note_id>/correct/", memory_views.note_correct_view, name="memory-correct"),
    path("memory/notes/<int:note_id>/forget/", memory_views.note_forget_view, name="memory-forget"),
    path("channels/<int:channel_id>/", channel_views.channel_detail, name="channel"),
    path("approvals/", approval_views.approval_queue, name="approvals"),
    path("approvals/list/", approval_views.approval_queue_fragment, name="approvals-list"),
    path("approvals/<uuid:approval_id>/decide/", approval_views.approval_decide_view, name="approval-decide"),
    path("approvals/<uuid:approval_id>/revoke-window/", approval_views.approval_window_revoke_view,
         name="approval-window-revoke"),
    path("proposals/<uuid:proposal_id>/decide/", proposal_views.proposal_decide_view, name="proposal-decide"),
    path("proposals/<uuid:proposal_id>/retry/", proposal_views.proposal_retry_view, name="proposal-retry"),
    path("audit/", audit_views.audit_list, name="audit"),
    path("audit/export.csv", audit_views.audit_export_csv, name="audit-export"),
    path("audit/verify/", audit_views.audit_verify, name="audit-verify"),
    path("gateway/", gateway_views.gateway_health_page, name="gateway-health"),
    path("assets/<str:name>", views.asset, name="asset"),
]
