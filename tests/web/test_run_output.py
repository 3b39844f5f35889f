"""The run timeline shows the box's output in arrival order with stderr's parts marked, quoted (escaped),
and cut at the preview limit with the sources kept."""

from __future__ import annotations

from django.test import Client

from controlplane.fleet.models import Run
from tests.web.conftest import PASSWORD


def _timeline(user, run) -> str:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client.get(f"/runs/{run.pk}/").content.decode()


def test_stderr_parts_are_marked_in_arrival_order(admin_user, run):
    Run.objects.filter(pk=run.pk).update(output="out\n<b>err</b>\nmore\n",
                                         output_sources=[["stdout", 4], ["stderr", 11], ["stdout", 5]])
    html = _timeline(admin_user, run)
    stdout_1 = html.index('<span class="output-stdout" title="stdout">out')
    stderr = html.index('<span class="output-stderr" title="stderr">')
    stdout_2 = html.index('<span class="output-stdout" title="stdout">more')
    assert stdout_1 < stderr < stdout_2
    assert "&lt;b&gt;err&lt;/b&gt;" in html and "<b>err</b>" not in html  # quoted data, never markup
    assert "[stderr] " in html


def test_the_preview_cut_keeps_sources(admin_user, run, settings):
    settings.ROSTER_WEB_OUTPUT_PREVIEW_CHARS = 6
    Run.objects.filter(pk=run.pk).update(output="out\nerr-long\n",
                                         output_sources=[["stdout", 4], ["stderr", 9]])
    html = _timeline(admin_user, run)
    assert '<span class="output-stderr" title="stderr">' in html and "er</span>" in html
    assert "err-long" not in html and "cut short" in html
