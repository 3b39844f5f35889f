"""Legible JSON answers to the box. Never contain a secret value: only reason, message and ids. Each deny
also carries the model provider's error shape (roster_gateway.provider_errors) for the agent's SDK."""

from __future__ import annotations

import json

from mitmproxy import http

from roster_gateway import metrics
from roster_gateway.provider_errors import is_final, provider_error, wire_of_request

PROXY_AUTHENTICATE = 'Basic realm="roster", charset="UTF-8"'
WIRE_KEY = "roster_wire"  # flow metadata: the wire format the control plane said the host speaks


def deny_response(status: int, reason: str, message: str, *, decision_id: str = "",
                  budget: dict | None = None, comment: str | None = None, wire: str = "") -> http.Response:
    body: dict = {**provider_error(wire, status, reason, message),
                  "verdict": "deny", "reason": reason, "message": message}
    if comment:  # an approver's words with a refusal
        body["comment"] = comment
    if decision_id:
        body["decision_id"] = decision_id
    if budget is not None:
        body["budget"] = budget
    headers = {"Content-Type": "application/json", "X-Roster-Deny-Reason": reason,
               "Cache-Control": "no-store", "Connection": "close"}
    if is_final(status):
        headers["X-Should-Retry"] = "false"
    if status == 407:
        headers["Proxy-Authenticate"] = PROXY_AUTHENTICATE
    return http.Response.make(status, json.dumps(body, sort_keys=True).encode() + b"\n", headers)


def deny_flow(flow: http.HTTPFlow, status: int, reason: str, message: str, **extra) -> None:
    request = flow.request
    wire = flow.metadata.get(WIRE_KEY) or wire_of_request(request.method, request.path, request.headers)
    flow.response = deny_response(status, reason, message, wire=wire, **extra)
    flow.metadata["roster_denied"] = reason
    metrics.count_deny(reason)
