"""Issue 27.11, the proposal forms: a trust rule whose expiry has already passed is refused (admin and
service; a stored rule that has since expired can still be edited), and the destination form shows only
its kind's fields, refusing another kind's field instead of dropping it (an smtp_host on a webhook)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.fleet.models import Worker
from controlplane.proposals.models import Destination, TrustRule
from controlplane.proposals.services import trust_rule_save
from tests.proposals.test_admin import SMTP, admin_client  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

WEBHOOK = {**SMTP, "name": "hooks", "kind": "webhook", "url": "https://hooks.example.com/in",
           "method": "POST", "smtp_host": "", "smtp_port": "", "from_address": "", "allowed_recipients": ""}


def _rule_form(dest: Destination, when) -> dict:
    return {"name": "hooks-ok", "worker": Worker.objects.get().pk, "destination": dest.pk, "kind": "webhook",
            "max_per_day": "5", "enabled": "on",
            "expires_at_0": f"{when:%Y-%m-%d}", "expires_at_1": f"{when:%H:%M:%S}"}


def test_an_already_expired_trust_rule_is_refused(admin_client):  # noqa: F811
    Worker.objects.create(name="w1")
    assert admin_client.post("/admin/proposals/destination/add/", WEBHOOK).status_code == 302
    dest = Destination.objects.get()
    before = AuditRecord.objects.count()
    response = admin_client.post("/admin/proposals/trustrule/add/",
                                 _rule_form(dest, timezone.now() - timedelta(hours=1)))
    assert response.status_code == 200 and "has already passed" in response.content.decode()
    assert not TrustRule.objects.exists() and AuditRecord.objects.count() == before
    with pytest.raises(ValidationFailed, match="already passed"):
        trust_rule_save(TrustRule(name="late", worker=Worker.objects.get(), destination=dest,
                                  expires_at=timezone.now() - timedelta(seconds=1)), actor="t")
    response = admin_client.post("/admin/proposals/trustrule/add/",
                                 _rule_form(dest, timezone.now() + timedelta(days=1)))
    assert response.status_code == 302 and TrustRule.objects.count() == 1


def test_a_rule_that_has_since_expired_can_still_be_edited(admin_client):  # noqa: F811
    worker = Worker.objects.create(name="w1")
    admin_client.post("/admin/proposals/destination/add/", WEBHOOK)
    rule = trust_rule_save(TrustRule(name="old", worker=worker, destination=Destination.objects.get(),
                                     expires_at=timezone.now() + timedelta(days=1)), actor="t")
    TrustRule.objects.filter(pk=rule.pk).update(expires_at=timezone.now() - timedelta(days=1))
    rule.refresh_from_db()
    rule.enabled = False
    trust_rule_save(rule, actor="t")  # the expiry did not move: disabling it is fine
    assert TrustRule.objects.get().enabled is False


def test_another_kinds_field_is_refused_not_dropped(admin_client):  # noqa: F811
    response = admin_client.post("/admin/proposals/destination/add/",
                                 {**WEBHOOK, "smtp_host": "mail.example.com"})
    assert response.status_code == 200
    assert "a webhook destination has no smtp_host" in response.content.decode()
    assert not Destination.objects.exists()


def test_the_change_form_shows_only_its_kinds_fields(admin_client):  # noqa: F811
    admin_client.post("/admin/proposals/destination/add/", WEBHOOK)
    dest = Destination.objects.get()
    page = admin_client.get(f"/admin/proposals/destination/{dest.pk}/change/").content.decode()
    assert 'name="url"' in page and 'name="secret_header"' in page
    for other in ("smtp_host", "smtp_port", "from_address", "allowed_recipients", "branch_pattern"):
        assert f'name="{other}"' not in page, other
    response = admin_client.post(f"/admin/proposals/destination/{dest.pk}/change/",
                                 {**WEBHOOK, "url": "https://hooks.example.com/other"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Destination.objects.get().url == "https://hooks.example.com/other"
