"""Metrics after real traffic: a box's requests through the real gateway (mitmdump) to the real decision API
process, then both metrics endpoints scraped over HTTP and parsed as Prometheus parses them. Counts are
exact (deltas of this test's own traffic); a held request shows in both gauges while it waits; the
control plane's listener answers only its scrape token and is not on the decision API's port."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.db import close_old_connections
from prometheus_client.parser import text_string_to_metric_families

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.core.roles import APPROVERS
from controlplane.ledger.models import Cap
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.gateway.conftest import METRICS_SCRAPE_TOKEN, box_client, grant, wait_until

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _get(url: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, timeout=10, trust_env=False)


def parse(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


class Scraper:
    def __init__(self, stack):
        self.gateway_url = stack.gateway.health_url.replace("/healthz", "/metrics")
        self.control_plane_url = stack.metrics_url

    def gateway(self) -> tuple[Samples, str]:
        response = _get(self.gateway_url)
        assert response.status_code == 200, response.text
        return parse(response.text), response.text

    def control_plane(self) -> tuple[Samples, str]:
        response = _get(self.control_plane_url, METRICS_SCRAPE_TOKEN)
        assert response.status_code == 200, response.text
        return parse(response.text), response.text


def at(samples: Samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def scraper(stack) -> Scraper:
    return Scraper(stack)


def test_allows_and_denies_are_counted_on_both_endpoints(stack, token, scraper):
    Cap.objects.create(worker=None, unit="requests", window="day", limit=100)
    grant("metered", stack.http)
    gw_before, _ = scraper.gateway()
    cp_before, _ = scraper.control_plane()
    with box_client(stack.gateway, token) as box:
        for _ in range(3):
            assert box.get(stack.http.url("/ok")).status_code == 200
        for _ in range(2):
            denied = box.get(stack.other.url("/nope"))
            assert denied.status_code == 403 and denied.json()["reason"] == "no_grant"

    def outcomes_reported():
        samples, _ = scraper.gateway()
        sent = at(samples, "roster_gateway_outcome_batch_size_sum") - at(gw_before,
                                                                          "roster_gateway_outcome_batch_size_sum")
        return samples if sent >= 3 else None

    gw_after = wait_until(outcomes_reported, timeout=10)
    assert gw_after, "the gateway did not report its 3 outcomes"
    cp_after, cp_text = scraper.control_plane()

    def delta(after, before, name, **labels):
        return at(after, name, **labels) - at(before, name, **labels)

    assert delta(gw_after, gw_before, "roster_gateway_requests_total", verdict="allow", reason="granted") == 3
    assert delta(gw_after, gw_before, "roster_gateway_requests_total", verdict="deny", reason="no_grant") == 2
    assert delta(gw_after, gw_before, "roster_gateway_decide_seconds_count") == 5
    assert delta(gw_after, gw_before, "roster_gateway_outcome_batch_size_sum") == 3
    assert delta(gw_after, gw_before, "roster_gateway_upstream_errors_total") == 0
    assert delta(cp_after, cp_before, "roster_decisions_total", verdict="allow", reason="granted") == 3
    assert delta(cp_after, cp_before, "roster_decisions_total", verdict="deny", reason="no_grant") == 2
    assert delta(cp_after, cp_before, "roster_decide_seconds_count") == 5
    assert delta(cp_after, cp_before, "roster_audit_append_seconds_count") >= 5
    # Read at scrape time from the database and the broker.
    assert at(cp_after, "roster_runs", state="running") == 1
    assert at(cp_after, "roster_cap_limit", scope="org", unit="requests", window="day") == 100
    assert at(cp_after, "roster_cap_spent", scope="org", unit="requests", window="day") == 3
    assert at(cp_after, "roster_metrics_source_up", source="database") == 1
    assert at(cp_after, "roster_metrics_source_up", source="broker") == 1
    _labels_are_bounded(gw_after, cp_after, cp_text, token)


def _labels_are_bounded(gw: Samples, cp: Samples, cp_text: str, token: str) -> None:
    allowed = {"verdict", "reason", "result", "le", "state", "scope", "unit", "window", "queue", "source",
               "pid"}
    for samples in (gw, cp):
        for name, labels in samples:
            if name.startswith("roster_"):  # (the client library's process and GC metrics have their own)
                assert {k for k, _ in labels} <= allowed, (name, labels)
    assert token not in cp_text and "/nope" not in cp_text and "dc_" not in cp_text


@pytest.fixture
def approver(stack):
    user = User.objects.create_user(f"metrics{time.monotonic_ns()}", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user


def test_a_held_request_is_one_in_both_gauges_until_approved_then_zero(stack, token, approver, scraper):
    grant("asked", stack.http, mode="ask")
    gw_before, _ = scraper.gateway()
    cp_before, _ = scraper.control_plane()
    results: dict = {}

    def box_request():
        with box_client(stack.gateway, token) as box:
            results["response"] = box.post(stack.http.url("/send"), content=b"payload")

    thread = threading.Thread(target=box_request, daemon=True)
    thread.start()
    try:
        held = wait_until(lambda: at(scraper.gateway()[0], "roster_gateway_held_requests") == 1, timeout=10)
        assert held, "the gateway's gauge never showed the held request"
        assert at(scraper.control_plane()[0], "roster_approvals_pending") == 1
        approval = Approval.objects.get(status="pending")
        approval_decide(approval.pk, approver, True, "web")
    finally:
        close_old_connections()
        thread.join(10)
    assert results["response"].status_code == 200
    gw_after, _ = scraper.gateway()
    cp_after, _ = scraper.control_plane()
    assert at(gw_after, "roster_gateway_held_requests") == 0
    assert at(cp_after, "roster_approvals_pending") == 0
    for after, before, name, labels in (
            (gw_after, gw_before, "roster_gateway_holds_total", {"result": "approved"}),
            (gw_after, gw_before, "roster_gateway_requests_total", {"verdict": "allow", "reason": "granted"}),
            (cp_after, cp_before, "roster_decisions_total", {"verdict": "ask",
                                                             "reason": "approval_required"})):
        assert at(after, name, **labels) - at(before, name, **labels) == 1, name


@pytest.mark.parametrize("bearer", [None, "wrong-token", GATEWAY_SERVICE_TOKEN],
                         ids=["none", "wrong", "gateway-token"])  # (that token is random per process)
def test_the_control_plane_metrics_refuse_without_the_scrape_token(stack, bearer):
    response = _get(stack.metrics_url, bearer)
    assert response.status_code == 401
    assert "roster_decisions" not in response.text and "roster_cap" not in response.text


def test_the_decision_api_port_does_not_serve_metrics(stack):
    response = _get(stack.control_plane_url + "/metrics", METRICS_SCRAPE_TOKEN)
    assert response.status_code == 404 and "roster_" not in response.text
