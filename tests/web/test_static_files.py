"""The admin's styles and scripts are served with DEBUG off, by the web process itself (WhiteNoise over
what `collectstatic` gathered into STATIC_ROOT), as `make up` and the image build prepare them."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client


@pytest.fixture
def collected(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", "--noinput", "-v", "0")
    return settings.STATIC_ROOT


@pytest.mark.parametrize("path,kind", [("/static/admin/css/base.css", "text/css"),
                                       ("/static/admin/js/core.js", "text/javascript")])
def test_admin_static_files_are_served_with_debug_off(collected, path, kind):
    response = Client().get(path)
    assert response.status_code == 200
    assert response["Content-Type"].startswith(kind)
    body = b"".join(response.streaming_content)
    assert body == (collected / path.removeprefix("/static/")).read_bytes()


def test_compressed_copies_are_offered_to_clients_that_accept_them(collected):
    response = Client().get("/static/admin/css/base.css", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response["Content-Encoding"] == "gzip"


def test_without_collectstatic_nothing_is_served(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "empty"
    assert Client().get("/static/admin/css/base.css").status_code == 404
