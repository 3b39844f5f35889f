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


def _worker_edits(name: str) -> list[dict]:
    import json

    from controlplane.audit.models import AuditRecord

    return [json.loads(r.body)["data"] for r in
            AuditRecord.objects.filter(kind="worker_change", worker_name=name).order_by("seq")]


def test_an_admin_edit_of_a_workers_identity_is_on_the_record_under_that_worker(client):
    worker = worker_create("alpha", identity="You help the ops team.")
    client.force_login(User.objects.create_superuser("root", password="pw-123456789"))
    form = {"name": "alpha", "description": "", "identity": "You help the ops team. Never deploy.",
            "active": "on"}
    assert client.post(f"/admin/fleet/worker/{worker.pk}/change/", form).status_code == 302
    (edit,) = _worker_edits("alpha")
    assert (edit["action"], edit["by"], edit["via"]) == ("updated", "root", "admin")
    assert edit["changed"] == ["identity"]
    assert edit["before"]["identity"] == "You help the ops team."
    assert edit["after"]["identity"] == "You help the ops team. Never deploy."
    # Saving it again unchanged records nothing; deleting it is recorded too.
    client.post(f"/admin/fleet/worker/{worker.pk}/change/", form)
    assert len(_worker_edits("alpha")) == 1
    assert client.post(f"/admin/fleet/worker/{worker.pk}/delete/", {"post": "yes"}).status_code == 302
    assert [e["action"] for e in _worker_edits("alpha")] == ["updated", "deleted"]
    assert not Worker.objects.filter(pk=worker.pk).exists()


def test_a_refused_identity_edit_records_only_what_changed(client):
    from django.contrib.auth.models import Permission

    worker = worker_create("alpha", identity="original")
    staff = User.objects.create_user("carol", password="pw-123456789", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["change_worker", "view_worker"]))
    client.force_login(staff)
    client.post(f"/admin/fleet/worker/{worker.pk}/change/",
                {"name": "alpha", "description": "d", "identity": "hijacked", "active": "on"})
    (edit,) = _worker_edits("alpha")
    assert edit["changed"] == ["description"] and edit["after"]["identity"] == "original"
