"""Legible JSON answers to the box. Never contain a secret value: only reason, message and ids."""

from __future__ import annotations

import json

from mitmproxy import http

from roster_gateway import metrics

PROXY_AUTHENTICATE = 'Basic realm="roster", charset="UTF-8"'


def deny_response(status: int, reason: str, message: str, *, decision_id: str = "",
                  budget: dict | None = None, comment: str | None = None) -> http.Response:
    body: dict = {"verdict": "deny", "reason": reason, "message": message}
    if comment:  # an approver's words with a refusal
        body["comment"] = comment
    if decision_id:
        body["decision_id"] = decision_id
    if budget is not None:
        body["budget"] = budget
    headers = {"Content-Type": "application/json", "X-Roster-Deny-Reason": reason,
               "Cache-Control": "no-store", "Connection": "close"}
    if status == 407:
        headers["Proxy-Authenticate"] = PROXY_AUTHENTICATE
    return http.Response.make(status, json.dumps(body, sort_keys=True).encode() + b"\n", headers)


def deny_flow(flow: http.HTTPFlow, status: int, reason: str, message: str, **extra) -> None:
    flow.response = deny_response(status, reason, message, **extra)
    flow.metadata["roster_denied"] = reason
    metrics.count_deny(reason)
