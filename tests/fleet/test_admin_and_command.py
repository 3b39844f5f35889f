import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from controlplane.core.roles import ADMINS, APPROVERS
from controlplane.fleet.admin import WorkerAdmin
from controlplane.fleet.models import Worker
from controlplane.fleet.services import worker_create

pytestmark = pytest.mark.django_db


def _request(user):
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def _admin():
    from django.contrib import admin

    return WorkerAdmin(Worker, admin.site)


def test_identity_editable_by_superuser_and_admins_only():
    worker = worker_create("alpha")
    root = User.objects.create_superuser("root", password="pw-123456789")
    admin_user = User.objects.create_user("ada", password="pw-123456789", is_staff=True)
    admin_user.groups.add(Group.objects.get(name=ADMINS))
    approver = User.objects.create_user("bob", password="pw-123456789", is_staff=True)
    approver.groups.add(Group.objects.get(name=APPROVERS))
    admin = _admin()
    assert "identity" not in admin.get_readonly_fields(_request(root), worker)
    assert "identity" not in admin.get_readonly_fields(_request(admin_user), worker)
    assert "identity" in admin.get_readonly_fields(_request(approver), worker)


def test_identity_cannot_be_posted_by_non_admin(client):
    worker = worker_create("alpha", identity="original")
    staff = User.objects.create_user("carol", password="pw-123456789", is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["change_worker", "view_worker"]))
    client.force_login(staff)
    response = client.post(f"/admin/fleet/worker/{worker.pk}/change/",
                           {"name": "alpha", "description": "d", "identity": "hijacked", "active": "on"})
    assert response.status_code in (200, 302)
    worker.refresh_from_db()
    assert worker.identity == "original"
    assert worker.description == "d"


def test_worker_command_create_and_list(capsys):
    call_command("worker", "create", "beta", "--description", "the second")
    call_command("worker", "list")
    out = capsys.readouterr().out
    assert "created worker beta" in out and "beta\tactive\tthe second" in out
    assert Worker.objects.get(name="beta").identity == ""


def test_worker_command_rejects_bad_name():
    with pytest.raises(CommandError, match="name"):
        call_command("worker", "create", "Bad Name")
    assert not Worker.objects.exists()
