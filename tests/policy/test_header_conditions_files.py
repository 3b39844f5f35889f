# ruff: noqa: E501 - one case per line reads best as a table
"""Header conditions and max_body_size through the one validator and the TOML files: bad input is a clear
error naming the field and nothing is saved; a file exports and imports back unchanged."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.policy.models import Grant
from controlplane.policy.validation import validate_grant
from controlplane.vault.models import Secret

pytestmark = pytest.mark.django_db

JSON_ONLY = '''
host = "api.example.com"
methods = ["POST"]
max_body_size = 65536

[[header_conditions]]
name = "Content-Type"
matches = "application/json(;\\\\s*charset=utf-8)?"

[[header_conditions]]
name = "x-http-method-override"
absent = true

[[header_conditions]]
name = "x-api-key"
present = true
'''
NO_OVERRIDE = '''
host = "*.example.com"
mode = "deny"
header_conditions = [{name = "x-http-method-override", present = true}]
'''


@pytest.fixture(autouse=True)
def secret():
    Secret.objects.create(name="oa", kind="openai", ciphertext=b"x", sentinel="sk-proj-sentinel0123456789")


def run(*args) -> str:
    out = io.StringIO()
    call_command("grants", *map(str, args), stdout=out)
    return out.getvalue()


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_conditions_validate_with_names_lower_cased():
    v = validate_grant({"host": "api.example.com", "max_body_size": 0, "header_conditions": [
        {"name": "Content-Type", "equals": "application/json"}, {"name": "X-Http-Method-Override", "absent": True},
    ]}, slug="g").values
    assert v["header_conditions"] == [{"name": "content-type", "equals": "application/json"},
                                      {"name": "x-http-method-override", "absent": True}]
    assert v["max_body_size"] == 0


def cond(**kw):
    return {"host": "api.example.com", "header_conditions": [kw]}


BAD = [
    ("not a list", {"host": "a.example.com", "header_conditions": {"name": "a"}}, "header_conditions", "list of tables"),
    ("no name", cond(equals="x"), "header_conditions", "a `name`"),
    ("no test", cond(name="a"), "header_conditions", "exactly one of"),
    ("two tests", cond(name="a", present=True, absent=True), "header_conditions", "exactly one of"),
    ("unknown key", cond(name="a", present=True, contains="x"), "header_conditions", "unknown: contains"),
    ("bad header name", cond(name="bad name", present=True), "header_conditions", "not a valid header name"),
    ("header name with a colon", cond(name="a:b", present=True), "header_conditions", "not a valid header name"),
    ("present = false", cond(name="a", present=False), "header_conditions", "present = true"),
    ("equals not text", cond(name="a", equals=5), "header_conditions", "non-empty text"),
    ("equals empty", cond(name="a", equals=""), "header_conditions", "non-empty text"),
    ("equals with a newline", cond(name="a", equals="x\r\ny: z"), "header_conditions", "control characters"),
    ("equals with a trailing space", cond(name="a", equals="json "), "header_conditions", "spaces at an end"),
    ("equals too long", cond(name="a", equals="x-" * 600), "header_conditions", "at most 1024"),
    ("pattern does not compile", cond(name="a", matches="(unclosed"), "header_conditions", "does not compile"),
    ("pattern backreference (not RE2)", cond(name="a", matches=r"(a)\1"), "header_conditions", "does not compile"),
    ("pattern too long", cond(name="a", matches="a" * 257), "header_conditions", "at most 256"),
    ("same header twice", {"host": "a.example.com", "header_conditions": [{"name": "a", "present": True}, {"name": "A", "absent": True}]}, "header_conditions", "one condition per header"),
    ("too many", {"host": "a.example.com", "header_conditions": [{"name": f"h{i}", "present": True} for i in range(33)]}, "header_conditions", "at most 32"),
    ("the proxy's own header", cond(name="Proxy-Authorization", absent=True), "header_conditions", "gateway's own"),
    ("host header", cond(name="host", equals="a.example.com"), "header_conditions", "gateway's own"),
    ("content-length", cond(name="content-length", equals="5"), "header_conditions", "max_body_size"),
    ("a credential header by value", cond(name="Authorization", equals="Bearer abc"), "header_conditions", "present or absent"),
    ("a credential header by pattern", cond(name="x-api-key", matches="sk-.*"), "header_conditions", "present or absent"),
    ("a cookie by value", cond(name="cookie", equals="a=b"), "header_conditions", "present or absent"),
    ("a token-looking value", cond(name="x-team", equals="ghp_4f9K2mQ8xZ1rT7vB3nL6pW0sY5dA"), "header_conditions", "looks like a credential"),
    ("a token-looking pattern", cond(name="x-team", matches="(ghp_4f9K2mQ8xZ1rT7vB3nL6pW0sY5dA|x)"), "header_conditions", "looks like a credential"),
    ("a vault sentinel", cond(name="x-team", equals="sk-proj-sentinel0123456789"), "header_conditions", "looks like a credential"),
    ("max_body_size negative", {"host": "a.example.com", "max_body_size": -1}, "max_body_size", "0 or more"),
    ("max_body_size as text", {"host": "a.example.com", "max_body_size": "10"}, "max_body_size", "0 or more"),
    ("max_body_size a bool", {"host": "a.example.com", "max_body_size": True}, "max_body_size", "0 or more"),
    ("max_body_size huge", {"host": "a.example.com", "max_body_size": 2**60}, "max_body_size", "0 or more"),
    ("max_body_size on a deny", {"host": "a.example.com", "mode": "deny", "max_body_size": 10}, "max_body_size", "every body size"),
    ("conditions on a tunnel", {"host": "a.example.com", "port": 8443, "tunnel": True, "header_conditions": [{"name": "a", "present": True}]}, "header_conditions", "tunnel"),
    ("max_body_size on a tunnel", {"host": "a.example.com", "port": 8443, "tunnel": True, "max_body_size": 5}, "max_body_size", "tunnel"),
]


@pytest.mark.parametrize("name,data,field,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_conditions_are_clear_errors(name, data, field, fragment):
    with pytest.raises(ValidationFailed) as info:
        validate_grant(data, slug="g")
    assert field in info.value.errors, info.value.errors
    assert fragment in info.value.errors[field], info.value.errors[field]


def test_ordinary_values_are_not_mistaken_for_credentials():
    for value in ("application/vnd.github.v3+json", "123e4567-e89b-12d3-a456-426614174000", "2024-06-01",
                  "application/json; charset=utf-8", "gzip, deflate, br"):
        validate_grant(cond(name="x-a", equals=value), slug="g")


def test_toml_conditions_import_export_round_trip(tmp_path):
    d = write(tmp_path / "in", {"json-only.toml": JSON_ONLY, "no-override.toml": NO_OVERRIDE})
    assert "created: 2" in run("import", d)
    g = Grant.objects.get(slug="json-only")
    assert g.header_conditions == [{"name": "content-type", "matches": r"application/json(;\s*charset=utf-8)?"},
                                   {"name": "x-http-method-override", "absent": True},
                                   {"name": "x-api-key", "present": True}]
    assert g.max_body_size == 65536
    snapshot = list(Grant.objects.order_by("slug").values())
    run("export", tmp_path / "out")
    text = (tmp_path / "out" / "json-only.toml").read_text()
    assert "header_conditions = [" in text and 'name = "content-type"' in text and "max_body_size = 65536" in text
    assert "unchanged: 2" in run("import", tmp_path / "out")
    Grant.objects.all().delete()
    run("import", tmp_path / "out")
    strip = ("id", "created_at", "updated_at")
    assert [{k: v for k, v in g.items() if k not in strip} for g in Grant.objects.order_by("slug").values()] == [
        {k: v for k, v in g.items() if k not in strip} for g in snapshot]
    run("export", tmp_path / "out2")
    assert (tmp_path / "out2" / "json-only.toml").read_text() == text


def test_a_bad_condition_in_a_file_imports_nothing(tmp_path):
    run("import", write(tmp_path / "a", {"no-override.toml": NO_OVERRIDE}))
    before, audit_before = list(Grant.objects.values()), AuditRecord.objects.count()
    bad = JSON_ONLY.replace('present = true', 'equals = "sk-proj-sentinel0123456789"')
    with pytest.raises(CommandError, match="nothing imported") as info:
        run("import", write(tmp_path / "b", {"json-only.toml": bad, "no-override.toml": NO_OVERRIDE.replace("deny", "ask")}))
    assert "json-only.toml: header_conditions: header x-api-key carries a credential" in str(info.value)
    assert "sk-proj-sentinel0123456789" not in str(info.value).replace("equals = ", "")
    assert list(Grant.objects.values()) == before and AuditRecord.objects.count() == audit_before


def test_condition_changes_are_audited_with_before_and_after(tmp_path):
    run("import", write(tmp_path / "a", {"no-override.toml": NO_OVERRIDE}))
    changed = NO_OVERRIDE.replace("present = true", "absent = true").replace('mode = "deny"', 'mode = "ask"')
    assert "updated: 1" in run("import", write(tmp_path / "b", {"no-override.toml": changed}))
    record = AuditRecord.objects.filter(kind="grant_change").order_by("-seq").first()
    assert '"present":true' in record.body and '"absent":true' in record.body


def test_the_documented_file_example_validates():
    import re
    import tomllib

    from controlplane.fleet.models import Worker

    Worker.objects.create(name="researcher")
    Secret.objects.create(name="openai-main", kind="openai", ciphertext=b"x", sentinel="sk-proj-doc")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "grants.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.DOTALL).group(1)
    values = validate_grant(tomllib.loads(example), slug="openai-chat").values
    assert values["max_body_size"] == 65536
    assert values["header_conditions"] == [
        {"name": "content-type", "matches": r"application/json(;\s*charset=utf-8)?"},
        {"name": "x-http-method-override", "absent": True}]
