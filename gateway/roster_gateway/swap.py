"""Apply an allow decision's secrets: set `inject` headers and swap `replace` sentinels in header values.
The control plane sends only the secret the matched grant names, toward the host it names."""

from __future__ import annotations

from mitmproxy import http

from roster_gateway.wire import Decision


def apply_secrets(request: http.Request, decision: Decision) -> int:
    """Returns how many header values changed (for logs; never the values themselves)."""
    changed = 0
    if decision.replace:
        fields = []
        for name, value in request.headers.fields:
            text = value.decode("utf-8", "surrogateescape")
            new = text
            for sentinel, real in decision.replace:
                new = new.replace(sentinel, real)
            if new != text:
                changed += 1
            fields.append((name, new.encode("utf-8", "surrogateescape") if new != text else value))
        request.headers.fields = tuple(fields)
    for header, value in decision.inject:
        request.headers[header] = value
        changed += 1
    return changed
