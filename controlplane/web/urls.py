from django.urls import path

from controlplane.web import approval_views, audit_views, channel_views, policy_views, proposal_views, views

app_name = "web"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("workers/<int:worker_id>/", views.worker_detail, name="worker"),
    path("workers/<int:worker_id>/policy/", policy_views.worker_policy, name="worker-policy"),
    path("runs/<int:run_id>/", views.run_timeline, name="run"),
    path("channels/<int:channel_id>/", channel_views.channel_detail, name="channel"),
    path("approvals/", approval_views.approval_queue, name="approvals"),
    path("approvals/list/", approval_views.approval_queue_fragment, name="approvals-list"),
    path("approvals/<uuid:approval_id>/decide/", approval_views.approval_decide_view, name="approval-decide"),
    path("proposals/<uuid:proposal_id>/decide/", proposal_views.proposal_decide_view, name="proposal-decide"),
    path("audit/", audit_views.audit_list, name="audit"),
    path("audit/export.csv", audit_views.audit_export_csv, name="audit-export"),
    path("audit/verify/", audit_views.audit_verify, name="audit-verify"),
    path("assets/<str:name>", views.asset, name="asset"),
]
