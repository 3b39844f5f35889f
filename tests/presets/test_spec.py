# ruff: noqa: E501, S108 - one case per line reads best as a table; /tmp paths are values under test
"""The preset validator: every field's rule, with the message a person reads (docs/presets.md)."""

from __future__ import annotations

import pytest

from controlplane.agents.spec import validate_preset
from controlplane.core.errors import ValidationFailed
from tests.presets.conftest import preset_data


def test_a_valid_preset_round_trips():
    spec = validate_preset(preset_data(), slug="pi")
    assert spec.command == ("pi", "-p", "--model", "{model}", "{prompt}")
    assert validate_preset(spec.as_data(), slug="pi") == spec


def _errors(data, **kw) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as caught:
        validate_preset(data, **kw)
    return caught.value.errors


BAD = [
    # name, overrides (None deletes the key), field, words in its message
    ("unknown key", {"imagee": "x"}, "preset", "unknown key imagee"),
    ("missing command", {"command": None}, "command", "is required"),
    ("slug not the directory", {"slug": "codex"}, "slug", "must be 'pi'"),
    ("bad slug", {"slug": "Pi!"}, "slug", "a-z, 0-9"),
    ("unknown wire format", {"wire": "openai"}, "wire", "unknown wire format 'openai'"),
    ("empty command", {"command": []}, "command", "list of 1 to"),
    ("command not strings", {"command": ["pi", 3]}, "command[1]", "must be a string"),
    ("typo placeholder in command", {"command": ["pi", "{promt}"]}, "command[1]", "unknown placeholder {promt}"),
    ("prompt placeholder in env", {"env": {"TASK": "{prompt}"}}, "env.TASK", "unknown placeholder {prompt}"),
    ("base_path outside paths", {"command": ["pi", "{base_path}"]}, "command[1]", "unknown placeholder {base_path}"),
    ("secret placeholder in a file", {"files": [{"path": "a", "content": "{secret}"}]}, "files[0].content", "unknown placeholder {secret}"),
    ("proxy variable", {"env": {"HTTPS_PROXY": "http://x"}}, "env.HTTPS_PROXY", "only exit is the gateway"),
    ("lowercase proxy", {"env": {"no_proxy": "*"}}, "env.no_proxy", "proxy"),
    ("CA variable", {"env": {"NODE_EXTRA_CA_CERTS": "/tmp/x"}}, "env.NODE_EXTRA_CA_CERTS", "CA"),
    ("TLS switch off", {"env": {"NODE_TLS_REJECT_UNAUTHORIZED": "0"}}, "env.NODE_TLS_REJECT_UNAUTHORIZED", "CA"),
    ("HOME", {"env": {"HOME": "/tmp"}}, "env.HOME", "identity"),
    ("ROSTER_ variable", {"env": {"ROSTER_RUN_ID": "1"}}, "env.ROSTER_RUN_ID", "Roster's own"),
    ("the key variable", {"env": {"OPENAI_API_KEY": "x"}}, "env.OPENAI_API_KEY", "sentinel"),
    ("another sentinel variable", {"env": {"ANTHROPIC_API_KEY": "x"}}, "env.ANTHROPIC_API_KEY", "sentinel"),
    ("a secret variable", {"env": {"ROSTER_SECRET_X": "x"}}, "env.ROSTER_SECRET_X", "Roster's own"),
    ("a credential-shaped value", {"env": {"TOKEN": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"}}, "env.TOKEN", "looks like a credential"),
    ("a Google key value", {"env": {"K": "AIzaSyA1234567890abcdefghijklmnopqrstu"}}, "env.K", "looks like a credential"),
    ("bad variable name", {"env": {"1X": "y"}}, "env.1X", "variable name"),
    ("non-string env value", {"env": {"X": 1}}, "env.X", "must be a string"),
    ("file path escaping $HOME", {"files": [{"path": "../etc/passwd", "content": ""}]}, "files[0].path", "stay inside $HOME"),
    ("absolute file path", {"files": [{"path": "/etc/passwd", "content": ""}]}, "files[0].path", "relative to $HOME"),
    ("dot segment inside", {"files": [{"path": "a/./b", "content": ""}]}, "files[0].path", "stay inside $HOME"),
    ("dot-dot inside", {"files": [{"path": "a/../../b", "content": ""}]}, "files[0].path", "stay inside $HOME"),
    ("trailing slash", {"files": [{"path": "a/", "content": ""}]}, "files[0].path", "stay inside $HOME"),
    ("backslash", {"files": [{"path": "a\\..\\b", "content": ""}]}, "files[0].path", "backslash"),
    ("unknown file mode", {"files": [{"path": "a", "mode": "write", "content": ""}]}, "files[0].mode", "copy"),
    ("unknown file key", {"files": [{"path": "a", "content": "", "owner": "root"}]}, "files[0]", "unknown key owner"),
    ("file listed twice", {"files": [{"path": "a", "content": ""}, {"path": "a", "content": ""}]}, "files", "listed twice"),
    ("file and directory", {"files": [{"path": "a", "content": ""}, {"path": "a/b", "content": ""}]}, "files", "a directory of another"),
    ("unknown answer rule", {"answer": "stderr"}, "answer", "unknown answer rule 'stderr'"),
    ("answer json without path", {"answer": "json:"}, "answer", "dotted field path"),
    ("bad stdin", {"stdin": "tty"}, "stdin", "none or prompt"),
    ("key variable Roster sets", {"key_variable": "HTTPS_PROXY"}, "key_variable", "cannot be HTTPS_PROXY"),
    ("bad image", {"image": "Roster Box"}, "image", "Docker image reference"),
    ("image placeholder unknown", {"image": "roster-box-pi:{tag}"}, "image", "Docker image reference"),
    ("image without build", {"build": ""}, "build", "is required with an image"),
    ("bad base URL", {"default_base_url": "ftp://x"}, "default_base_url", "http(s) URL"),
    ("base URL with a user", {"default_base_url": "https://u:p@api.openai.com/v1"}, "default_base_url", "no user"),
    ("base URL with a quote", {"default_base_url": 'https://api.openai.com/v1"'}, "default_base_url", "quotes"),
    ("base URL with a query", {"default_base_url": "https://api.openai.com/v1?x=1"}, "default_base_url", "no user, query"),
    ("bad model", {"default_model": "gpt 4"}, "default_model", "model name"),
    ("grant path without slash", {"suggested_grant": {"paths": ["v1/chat"]}}, "suggested_grant.paths[0]", "must start with /"),
    ("grant path placeholder", {"suggested_grant": {"paths": ["{base_url}/x"]}}, "suggested_grant.paths[0]", "unknown placeholder {base_url}"),
    ("grant inject format", {"suggested_grant": {"paths": ["/x"], "inject_format": "Bearer"}}, "suggested_grant.inject_format", "{secret}"),
    ("grant gateway header", {"suggested_grant": {"paths": ["/x"], "inject_header": "Host"}}, "suggested_grant.inject_header", "does not manage"),
    ("grant unknown key", {"suggested_grant": {"paths": ["/x"], "host": "evil"}}, "suggested_grant", "unknown key host"),
    ("packages in a built-in", {"npm_packages": ["left-pad"]}, "npm_packages", "only a custom preset"),
]


@pytest.mark.parametrize(("name", "overrides", "field", "words"), BAD, ids=[c[0] for c in BAD])
def test_each_bad_field_is_named(name, overrides, field, words):
    data = preset_data()
    for key, value in overrides.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    errors = _errors(data, slug="pi")
    assert field in errors, errors
    assert words in errors[field], errors[field]


def test_every_problem_at_once():
    errors = _errors(preset_data(wire="x", command=["{nope}"], env={"HOME": "/"}), slug="pi")
    assert {"wire", "command[0]", "env.HOME"} <= set(errors)


def test_literal_braces_and_escapes_are_not_placeholders():
    spec = validate_preset(preset_data(files=[{"path": "c.json", "content": '{"a": {"b": "{env:KEY}"}, "c": "{{model}}"}'}]), slug="pi")
    assert spec.files[0].content.startswith('{"a"')


@pytest.mark.parametrize(("packages", "ok"), [
    (["@google/gemini-cli@0.9.0"], True), (["left-pad"], True), (["git+https://x/y.git"], False),
    (["../local"], False), (["https://evil/x.tgz"], False), (["file:/tmp/x"], False),
])
def test_custom_packages_come_from_the_registry(packages, ok):
    data = preset_data(slug="mine", image="", build="", npm_packages=packages)
    if ok:
        assert validate_preset(data, custom=True).npm_packages == tuple(packages)
    else:
        assert "npm_packages[0]" in _errors(data, custom=True)


def test_custom_gives_an_image_or_packages_not_both():
    errors = _errors(preset_data(slug="mine", pypi_packages=["httpx==0.27"]), custom=True)
    assert "not both" in errors["image"]
