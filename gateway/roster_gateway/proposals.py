"""The reserved name for proposals (roster_proposals_host, proposals.roster.invalid by default): the
gateway answers it itself, never dialling anything, by calling the control plane with the run's proxy
token. Whatever the request says about a run or worker is the box's word and is never sent as identity.

    POST /v1/proposals        JSON body (docs/proposals.md)  -> the control plane's status and JSON
    GET  /v1/proposals/<id>   the proposal's state, for the run that made it"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from mitmproxy import http

from roster_gateway.client import ControlPlaneDown
from roster_gateway.facts import client_address
from roster_gateway.responses import deny_flow

if TYPE_CHECKING:
    from roster_gateway.options import GatewayConfig
    from roster_gateway.steps import Steps

SUBMIT_PATH = re.compile(r"^/v1/proposals/?$")
STATUS_PATH = re.compile(r"^/v1/proposals/([0-9a-fA-F-]{36})/?$")
ANSWER_STATUSES = frozenset({200, 201, 400, 402, 403, 404, 407, 409, 413, 415, 422})


def is_reserved(config: GatewayConfig | None, host: str) -> bool:
    return config is not None and host.rstrip(".").lower() == config.proposals_host


def _answer(flow: http.HTTPFlow, status: int, body: dict) -> None:
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
    flow.response = http.Response.make(status, json.dumps(body, sort_keys=True).encode() + b"\n", headers)
    flow.metadata["roster_proposal"] = True


async def answer(steps: Steps, flow: http.HTTPFlow, token: str | None) -> None:
    """Answer a request to the reserved name. Called after the usual header and size checks."""
    request = flow.request
    if not token:
        deny_flow(flow, 407, "bad_token", "proxy credentials (the run token) are required")
        return
    path = request.path.split("?", 1)[0]
    method = request.method.upper()
    status_match = STATUS_PATH.match(path)
    if SUBMIT_PATH.match(path):
        if method != "POST":
            _answer(flow, 405, {"error": "method_not_allowed", "message": "POST a proposal here"})
            return
        # Whatever the body is, the control plane judges it (strict JSON) and audits a rejection.
        body = request.get_content(strict=True) or b""
        call = steps.client.propose(token, body, client_address(flow))
    elif status_match:
        if method != "GET":
            _answer(flow, 405, {"error": "method_not_allowed", "message": "GET a proposal's state here"})
            return
        call = steps.client.proposal_status(token, status_match.group(1).lower(), client_address(flow))
    else:
        _answer(flow, 404, {"error": "not_found", "message": "POST /v1/proposals or GET /v1/proposals/<id>"})
        return
    try:
        status, doc = await call
    except ControlPlaneDown as exc:
        deny_flow(flow, 503, "control_plane_unavailable", str(exc))
        return
    if status not in ANSWER_STATUSES:
        status = 502
    _answer(flow, status, doc)
