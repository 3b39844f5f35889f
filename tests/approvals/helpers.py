from __future__ import annotations

from django.contrib.auth.models import Group, User

from controlplane.approvals.services import approval_open, request_snapshot
from controlplane.core.roles import APPROVERS


def open_approval(run, grant_slug="openai-chat", url="https://api.openai.com:443/v1/chat",
                  body_sha256="a" * 64):
    snapshot = request_snapshot(method="POST", url=url, headers=[["content-type", "application/json"]],
                                body_preview="{}", body_sha256=body_sha256, body_size=2)
    return approval_open(run=run, grant_id=None, grant_slug=grant_slug, snapshot=snapshot)


def approver(name="ann") -> User:
    user = User.objects.create_user(name, password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user
