"""A worker's effective policy on one page (issue 27.6): its agent, the grants that apply to it in the
engine's order (a deny first), the secrets they inject by name only, caps with spent and held, channels,
and "test a request" judged by the real engine on the stored grants, writing nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from controlplane.audit.models import AuditRecord
from controlplane.ledger.models import Cap
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set

pytestmark = pytest.mark.django_db
SECRET_VALUE = "sk-live-VALUE-never-on-a-page-0001"


@pytest.fixture
def policy(worker):
    key = secret_set("openai-main", SECRET_VALUE)
    Grant.objects.create(slug="docs-any", worker=None, host="*.example.com", methods=["GET"], mode="auto",
                         description="read the docs")
    Grant.objects.create(slug="api-chat", worker=worker, host="api.openai.com", methods=["POST"],
                         paths=["/v1/chat/completions"], mode="auto", secret=key,
                         inject_header="authorization", inject_format="Bearer {secret}")
    Grant.objects.create(slug="no-uploads", worker=worker, host="uploads.example.com", mode="deny")
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=100)
    return worker


@pytest.fixture
def viewer(client):
    user = User.objects.create_user("vera", password="pw-vera-123456")
    user.user_permissions.add(Permission.objects.get(codename="view_grant"))
    client.force_login(user)
    return client


def test_the_page_lists_grants_in_precedence_secrets_by_name_and_caps(policy, viewer):
    html = viewer.get(f"/workers/{policy.pk}/policy/").content.decode()
    order = [html.index(slug) for slug in ("no-uploads", "api-chat", "docs-any")]
    assert order == sorted(order)  # a deny first, then the exact host, then the wildcard
    assert "openai-main" in html and SECRET_VALUE not in html
    assert "every worker" in html and "read the docs" in html
    assert "worker:alpha" in html and ">100<" in html


def test_testing_a_request_answers_with_the_engine_and_writes_nothing(policy, viewer):
    before = AuditRecord.objects.count()
    page = viewer.get(f"/workers/{policy.pk}/policy/", {"method": "GET", "url": "https://uploads.example.com/x"})
    html = page.content.decode()
    assert "GET https://uploads.example.com:443/x: deny" in html and "no-uploads" in html
    allowed = viewer.get(f"/workers/{policy.pk}/policy/",
                         {"method": "GET", "url": "https://docs.example.com/guide"}).content.decode()
    assert "allow" in allowed and "by grant docs-any" in allowed
    assert AuditRecord.objects.count() == before


@pytest.mark.parametrize("query,message", [
    ({"method": "BREW", "url": "https://docs.example.com/"}, "method must be one of"),
    ({"method": "GET", "url": "not a url"}, "the test request is not valid"),
])
def test_a_bad_test_request_is_a_clear_error(policy, viewer, query, message):
    html = viewer.get(f"/workers/{policy.pk}/policy/", query).content.decode()
    assert message in html


def test_only_users_who_may_view_grants_see_it(policy, client):
    client.force_login(User.objects.create_user("nobody", password="pw-nobody-12345"))
    assert client.get(f"/workers/{policy.pk}/policy/").status_code == 403
    client.logout()
    assert client.get(f"/workers/{policy.pk}/policy/").status_code == 302
