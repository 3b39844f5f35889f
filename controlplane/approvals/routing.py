from django.urls import path

from controlplane.approvals.consumers import ApprovalQueueConsumer

websocket_urlpatterns = [
    path("ws/approvals/", ApprovalQueueConsumer.as_asgi()),
]
