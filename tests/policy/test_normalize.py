from __future__ import annotations

import pytest

from controlplane.policy.normalize import (
    NormalizationError,
    normalize_host,
    normalize_path,
    normalize_port,
    split_path,
)


@pytest.mark.parametrize(("raw", "canonical"), [
    ("api.example.com", "api.example.com"),
    ("API.Example.COM", "api.example.com"),
    ("api.example.com.", "api.example.com"),
    ("bücher.example", "xn--bcher-kva.example"),
    ("127.0.0.1", "127.0.0.1"),
    ("[::1]", "[::1]"),
    ("::1", "[::1]"),
    ("[0:0:0:0:0:0:0:1]", "[::1]"),
    ("[2001:DB8::1]", "[2001:db8::1]"),
])
def test_host_canonical_forms(raw, canonical):
    assert normalize_host(raw) == canonical


@pytest.mark.parametrize("raw", [
    "", ".", "api.example.com..", "api..example.com", ".api.example.com", "api.example.com:443",
    "user@api.example.com", "user:pw@api.example.com", "api%2eexample.com", "api.example.com/x",
    "api.example.com\\x", "api example.com", " api.example.com", "api.example.com\x00", "-api.example.com",
    "api-.example.com", "a" * 64 + ".com", "127.1", "0x7f.0.0.1", "2130706433", "127.000.000.001",
    "[::1]:443", "[fe80::1%eth0]", "[::1", "api.example.com#", "api.example.com?", "*.example.com",
    "a_b.example.com", "256.0.0.1", "api\u3002example.com", "\uff41pi.example.com",
])
def test_host_rejections(raw):
    with pytest.raises(NormalizationError):
        normalize_host(raw)


@pytest.mark.parametrize(("raw", "canonical"), [
    ("", "/"), ("/", "/"), ("/v1/chat", "/v1/chat"), ("//v1//chat", "/v1/chat"), ("/v1/./chat", "/v1/chat"),
    ("/v1/x/../chat", "/v1/chat"), ("/v1/%2e%2e/v2", "/v2"), ("/v1/%2E/chat", "/v1/chat"),
    ("/v1/.%2e/v2", "/v2"), ("/%76%31/chat", "/v1/chat"), ("/v1/a%7eb", "/v1/a~b"),
    ("/v1/a%3fb", "/v1/a%3Fb"),
    ("/v1/chat?x=/../admin", "/v1/chat"), ("/v1/chat/", "/v1/chat/"), ("/v1/ü", "/v1/%C3%BC"),
    ("/v1/a%20b", "/v1/a%20b"), ("/v1/a b", "/v1/a%20b"),
])
def test_path_canonical_forms(raw, canonical):
    assert normalize_path(raw) == canonical


@pytest.mark.parametrize("raw", [
    "v1/chat", "http://evil/v1", "/v1/%2fadmin", "/v1/%2Fadmin", "/v1/%5cadmin", "/v1\\admin", "/v1/%00",
    "/v1/\x00", "/v1/\r\nHost: x", "/v1/%0d%0a", "/../v1", "/v1/../../v2", "/%2e%2e/v1", "/v1/..;/admin",
    "/v1/.;/admin", "/v1/%zz", "/v1/%2", "/v1/%252e%252e/admin", "/v1/%252fadmin", "/v1#frag",
])
def test_path_rejections(raw):
    with pytest.raises(NormalizationError):
        normalize_path(raw)


def test_query_is_kept_separate():
    assert split_path("/v1/chat?a=1&b=/x") == ("/v1/chat", "a=1&b=/x")


@pytest.mark.parametrize(("port", "scheme", "expected"),
                         [(None, "https", 443), (None, "http", 80), (8080, "http", 8080)])
def test_ports(port, scheme, expected):
    assert normalize_port(port, scheme) == expected


@pytest.mark.parametrize(("port", "scheme"), [(0, "https"), (65536, "https"), (-1, "http"), ("443", "https"),
                                              (True, "https"), (None, "ftp")])
def test_bad_ports(port, scheme):
    with pytest.raises(NormalizationError):
        normalize_port(port, scheme)
