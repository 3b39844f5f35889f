"""Issue 27.13: the README says what a new user needs and what is true: approvers and auditors sign in at
/accounts/login/ (at /admin/ they are "not authorized"), and its package list names every Debian package
scripts/bootstrap.sh may install."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from controlplane.core.roles import APPROVERS, AUDITORS

REPO = Path(__file__).resolve().parents[2]


def _bootstrap_packages() -> set[str]:
    script = (REPO / "scripts" / "bootstrap.sh").read_text()
    pairs = re.search(r"for pair in (.*?); do", script, re.S).group(1).replace("\\\n", " ").split()
    return {pair.split(":", 1)[1] for pair in pairs} | set(re.findall(r"need_apt\+=\(([\w.-]+)\)", script))


def test_readme_names_every_package_bootstrap_installs():
    packages = _bootstrap_packages()
    assert {"redis-server", "docker.io", "npm", "docker-compose"} <= packages  # the parse found them
    readme = " ".join((REPO / "README.md").read_text().split())
    quoted = " ".join(re.findall(r"`([^`]*)`", readme)).split()  # every word inside backticks
    missing = packages - set(quoted)
    assert not missing, f"README's package list leaves out {sorted(missing)}"


def test_readme_sends_approvers_and_auditors_to_the_login_page():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "Approvers and auditors sign in at http://127.0.0.1:8000/accounts/login/" in readme


@pytest.mark.django_db
@pytest.mark.parametrize("group", [APPROVERS, AUDITORS])
def test_what_the_readme_says_holds_for_each_role(group):
    from django.contrib.auth.models import Group, User

    from controlplane.core.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user("someone", password="pw-someone-12345")
    user.groups.add(Group.objects.get(name=group))
    client = Client()
    page = client.post("/accounts/login/", {"username": "someone", "password": "pw-someone-12345"},
                       follow=True)
    assert page.status_code == 200 and page.wsgi_request.user.is_authenticated
    admin = client.get("/admin/", follow=True)
    assert admin.wsgi_request.path.startswith("/admin/login/")  # the admin does not let them in
