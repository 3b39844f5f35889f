"""The one preset validator, for the built-in files (`workers/presets/<slug>/preset.toml`), the admin's
custom presets and the `preset` command. Input is the file form (docs/presets.md); output a PresetSpec
or ValidationFailed naming every bad field (`command[2]`, `env.HTTPS_PROXY`, `files[0].path`) with what is
wrong. Nothing here touches the database: the vault check of values is the services' (it needs the key).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from django.conf import settings

from controlplane.agents import placeholders
from controlplane.agents.answers import AnswerRuleInvalid, parse_rule
from controlplane.agents.environment import NAME_RE, environment_problems, reserved_reason
from controlplane.core.errors import ValidationFailed

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
WIRES = ("openai-chat", "openai-responses", "anthropic-messages", "gemini")
FILE_MODES = ("copy", "link")
STDIN_MODES = ("none", "prompt")
# A Docker image reference: [registry[:port]/]name[/name...][:tag][@sha256:digest], lowercase names.
IMAGE_RE = re.compile(
    r"^(?:[a-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
HEADER_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
NPM_RE = re.compile(r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(?:@[A-Za-z0-9.^~<>=*+|_ -]{1,64})?$")
PYPI_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9,._-]+\])?"
                     r"(?:(?:==|>=|<=|~=|!=|>|<)[A-Za-z0-9.*+!_-]+)?$")
# Headers the gateway manages itself (as in controlplane.policy.validation): never an injection target.
_GATEWAY_HEADERS = frozenset({"host", "proxy-authorization", "content-length", "transfer-encoding",
                              "connection", "upgrade", "te", "keep-alive", "trailer", "proxy-connection"})
MAX_TITLE, MAX_ARG, MAX_ARGS, MAX_PACKAGES = 200, 4096, 64, 32

REQUIRED = ("slug", "title", "wire", "command", "answer", "key_variable")
KNOWN_KEYS = frozenset({*REQUIRED, "image", "build", "stdin", "default_model", "default_base_url", "env",
                        "files", "suggested_grant", "npm_packages", "pypi_packages"})
GRANT_KEYS = frozenset({"paths", "methods", "inject_header", "inject_format", "trace"})
FILE_KEYS = frozenset({"path", "mode", "content"})


@dataclass(frozen=True)
class PresetFile:
    path: str  # relative to $HOME, normalised
    mode: str  # copy | link
    content: str


@dataclass(frozen=True)
class SuggestedGrant:
    paths: tuple[str, ...]
    methods: tuple[str, ...] = ("POST",)
    inject_header: str = "authorization"
    inject_format: str = "Bearer {secret}"
    trace: bool = True


@dataclass(frozen=True)
class PresetSpec:
    slug: str
    title: str
    wire: str
    command: tuple[str, ...]
    answer: str
    key_variable: str
    default_model: str = ""
    image: str = ""
    build: str = ""
    stdin: str = "none"
    default_base_url: str = ""
    env: dict[str, str] = field(default_factory=dict)
    files: tuple[PresetFile, ...] = ()
    suggested_grant: SuggestedGrant | None = None
    npm_packages: tuple[str, ...] = ()
    pypi_packages: tuple[str, ...] = ()

    def as_data(self) -> dict:
        """The file form (what validate_preset reads back to an equal spec)."""
        data = {"slug": self.slug, "title": self.title, "image": self.image, "build": self.build,
                "wire": self.wire, "command": list(self.command), "stdin": self.stdin, "answer": self.answer,
                "key_variable": self.key_variable, "default_model": self.default_model,
                "default_base_url": self.default_base_url, "env": dict(self.env),
                "files": [{"path": f.path, "mode": f.mode, "content": f.content} for f in self.files]}
        if self.suggested_grant is not None:
            g = self.suggested_grant
            data["suggested_grant"] = {"paths": list(g.paths), "methods": list(g.methods),
                                       "inject_header": g.inject_header, "inject_format": g.inject_format,
                                       "trace": g.trace}
        if self.npm_packages:
            data["npm_packages"] = list(self.npm_packages)
        if self.pypi_packages:
            data["pypi_packages"] = list(self.pypi_packages)
        return data


def _line(value: object, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and not any(ord(c) < 0x20 for c in value)


def base_url_problem(url: object) -> str:
    """"" for an http(s) base URL a box may be given, else why not."""
    # Only URL characters that need no escaping in the JSON, TOML or YAML a preset's files put it in.
    if not isinstance(url, str) or len(url) > 500 or not re.match(
            r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%!$&()*+,;=:@/-]*)?$", url):
        return ("must be an http(s) URL with a host, an optional port and path (no user, query, fragment, "
                "quotes or spaces)")
    return ""


def file_path_problem(path: object) -> str:
    """"" for a path relative to $HOME that stays inside it, else why not."""
    if not isinstance(path, str) or not path or len(path) > 255:
        return "must be a path relative to $HOME, 1 to 255 characters"
    if path.startswith("/") or "\\" in path or "\x00" in path or any(ord(c) < 0x20 for c in path):
        return "must be relative to $HOME (no leading /, backslash or control characters)"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "must stay inside $HOME: no empty, . or .. parts"
    if posixpath.normpath(path) != path:
        return "must be written in its normal form"
    return ""


def _check_text(errors: dict, where: str, value: object, allowed, limit: int) -> None:
    if not isinstance(value, str):
        errors[where] = "must be a string"
    elif len(value.encode()) > limit or "\x00" in value:
        errors[where] = f"must be at most {limit} bytes, with no NUL"
    else:
        problem = placeholders.check(value, allowed)
        if problem:
            errors[where] = problem


def _command(errors: dict, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_ARGS:
        errors["command"] = f"must be a list of 1 to {MAX_ARGS} strings (argv; no shell)"
        return ()
    for i, arg in enumerate(value):
        _check_text(errors, f"command[{i}]", arg, placeholders.COMMAND, MAX_ARG)
    if isinstance(value[0], str) and not value[0].strip():
        errors["command[0]"] = "the program to run cannot be empty"
    return tuple(a for a in value if isinstance(a, str))


def _env(errors: dict, value: object, key_variable: str) -> dict[str, str]:
    if value is None:
        return {}
    problems = environment_problems(value, key_variable=key_variable)
    errors.update(problems)
    if not isinstance(value, dict):
        return {}
    for name, text in value.items():
        where = f"env.{name}"
        if where not in problems and isinstance(text, str):
            _check_text(errors, where, text, placeholders.ENV, settings.ROSTER_PRESET_MAX_ENV_VALUE_BYTES)
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _files(errors: dict, value: object) -> tuple[PresetFile, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > settings.ROSTER_PRESET_MAX_FILES:
        errors["files"] = f"must be a list of at most {settings.ROSTER_PRESET_MAX_FILES} [[files]] tables"
        return ()
    out: list[PresetFile] = []
    for i, item in enumerate(value):
        where = f"files[{i}]"
        if not isinstance(item, dict):
            errors[where] = "must be a table with path, mode and content"
            continue
        unknown = sorted(set(item) - FILE_KEYS)
        if unknown:
            errors[where] = f"unknown key {', '.join(unknown)}; a file has path, mode and content"
        path, mode, content = item.get("path"), item.get("mode", "copy"), item.get("content")
        problem = file_path_problem(path)
        if problem:
            errors[f"{where}.path"] = problem
        if mode not in FILE_MODES:
            errors[f"{where}.mode"] = "must be copy (the agent may write there) or link (read-only is enough)"
        _check_text(errors, f"{where}.content", content, placeholders.FILES,
                    settings.ROSTER_PRESET_MAX_FILE_BYTES)
        if not problem and mode in FILE_MODES and isinstance(content, str):
            out.append(PresetFile(path=path, mode=mode, content=content))
    paths = [f.path for f in out]
    for f in out:
        if paths.count(f.path) > 1:
            errors["files"] = f"{f.path} is listed twice"
        elif any(other.startswith(f.path + "/") for other in paths):
            errors["files"] = f"{f.path} is a file and a directory of another file"
    return tuple(out)


def _suggested_grant(errors: dict, value: object) -> SuggestedGrant | None:
    if value is None:
        return None
    where = "suggested_grant"
    if not isinstance(value, dict):
        errors[where] = "must be a table"
        return None
    unknown = sorted(set(value) - GRANT_KEYS)
    if unknown:
        errors[where] = f"unknown key {', '.join(unknown)}; expected {', '.join(sorted(GRANT_KEYS))}"
    paths = value.get("paths")
    if (not isinstance(paths, list) or not paths or len(paths) > 32
            or not all(isinstance(p, str) for p in paths)):
        errors[f"{where}.paths"] = "must be a list of 1 to 32 path patterns"
        paths = []
    for i, path in enumerate(paths):
        problem = placeholders.check(path, placeholders.PATHS)
        if problem:
            errors[f"{where}.paths[{i}]"] = problem
        elif not (path.startswith("/") or path.startswith("{base_path}")) or any(c in path for c in "?# \t"):
            errors[f"{where}.paths[{i}]"] = ("must start with / or {base_path}, with no query, fragment or "
                                             "space")
    methods = value.get("methods", ["POST"])
    if not isinstance(methods, list) or not methods or not all(m in METHODS for m in methods):
        errors[f"{where}.methods"] = f"must be a list of HTTP methods ({', '.join(sorted(METHODS))})"
        methods = []
    header = value.get("inject_header", "authorization")
    if not isinstance(header, str) or not HEADER_RE.match(header) or header.lower() in _GATEWAY_HEADERS:
        errors[f"{where}.inject_header"] = "must be a header name the gateway does not manage itself"
    inject = value.get("inject_format", "Bearer {secret}")
    if not _line(inject, 255) or "{secret}" not in inject or placeholders.check(inject, placeholders.INJECT):
        errors[f"{where}.inject_format"] = ('must contain {secret} and no other placeholder, e.g. '
                                            '"Bearer {secret}"')
    trace = value.get("trace", True)
    if not isinstance(trace, bool):
        errors[f"{where}.trace"] = "must be true or false"
    if any(k.startswith(where) for k in errors):
        return None
    return SuggestedGrant(paths=tuple(paths), methods=tuple(methods), inject_header=header.lower(),
                          inject_format=inject, trace=trace)


def _packages(errors: dict, data: dict, key: str, pattern: re.Pattern) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_PACKAGES or not all(isinstance(p, str) for p in value):
        errors[key] = f"must be a list of at most {MAX_PACKAGES} package names"
        return ()
    for i, spec in enumerate(value):
        if not pattern.match(spec):
            errors[f"{key}[{i}]"] = ("must be a registry package name with an optional version (no URL, path "
                                     "or git reference: layers build offline from the registry's packages)")
    return tuple(value)


def validate_preset(data: object, *, slug: str | None = None, custom: bool = False) -> PresetSpec:
    """The spec of `data` (a preset's file form), or ValidationFailed listing every problem. `slug`: the
    name it must have (a built-in's directory). `custom`: an admin's preset (may list packages to build a
    layer from instead of naming an image)."""
    if not isinstance(data, dict):
        raise ValidationFailed({"preset": "must be a table of keys"})
    errors: dict[str, str] = {}
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        errors["preset"] = f"unknown key {', '.join(unknown)}"
    for key in REQUIRED:
        if key not in data:
            errors[key] = "is required"
    got_slug = data.get("slug", "")
    if "slug" in data and (not isinstance(got_slug, str) or not SLUG_RE.match(got_slug)):
        errors["slug"] = "1 to 64 characters of a-z, 0-9 and -, starting with a letter or digit"
    elif slug is not None and got_slug != slug:
        errors["slug"] = f"must be {slug!r} (the preset's directory name)"
    if "title" in data and not _line(data["title"], MAX_TITLE):
        errors["title"] = f"one line of 1 to {MAX_TITLE} characters"
    image, build = data.get("image", ""), data.get("build", "")
    bad_image = not isinstance(image, str) or (image and (
        placeholders.check(image, placeholders.IMAGE)
        or not IMAGE_RE.match(image.replace("{box_tag}", "latest"))))
    if bad_image:
        errors["image"] = 'must be a Docker image reference ("" = the base box image; {box_tag} allowed)'
    if not isinstance(build, str) or len(build) > 500 or any(ord(c) < 0x20 for c in build):
        errors["build"] = "must be one line saying how to build the image"
    wire = data.get("wire")
    if "wire" in data and wire not in WIRES:
        errors["wire"] = f"unknown wire format {wire!r}; expected one of {', '.join(WIRES)}"
    command = _command(errors, data.get("command")) if "command" in data else ()
    stdin = data.get("stdin", "none")
    if stdin not in STDIN_MODES:
        errors["stdin"] = "must be none or prompt"
    answer = data.get("answer")
    if "answer" in data:
        try:
            parse_rule(answer)
        except AnswerRuleInvalid as exc:
            errors["answer"] = str(exc)
    key_variable = data.get("key_variable", "")
    if "key_variable" in data:
        reserved = reserved_reason(key_variable) if isinstance(key_variable, str) else ""
        if not isinstance(key_variable, str) or not NAME_RE.match(key_variable):
            errors["key_variable"] = "must be an environment variable name"
        elif reserved and "sentinel" not in reserved:
            errors["key_variable"] = f"cannot be {key_variable}: {reserved}"
    model = data.get("default_model", "")
    if model and (not isinstance(model, str) or not MODEL_RE.match(model)):
        errors["default_model"] = "must be a model name (letters, digits and ._:/@+-, up to 200)"
    base_url = data.get("default_base_url", "")
    if base_url and base_url_problem(base_url):
        errors["default_base_url"] = base_url_problem(base_url)
    env = _env(errors, data.get("env"), key_variable if isinstance(key_variable, str) else "")
    files = _files(errors, data.get("files"))
    grant = _suggested_grant(errors, data.get("suggested_grant"))
    npm = _packages(errors, data, "npm_packages", NPM_RE)
    pypi = _packages(errors, data, "pypi_packages", PYPI_RE)
    if (npm or pypi) and not custom:
        key = "npm_packages" if npm else "pypi_packages"
        errors[key] = "only a custom preset lists packages; a built-in one builds its layer with its build.sh"
    if custom and (npm or pypi) and image:
        errors["image"] = "give an image or packages to build a layer from, not both"
    if not custom and image and not build:
        errors["build"] = "is required with an image: the refusal of a run whose image is missing prints it"
    if errors:
        raise ValidationFailed(errors)
    return PresetSpec(slug=got_slug, title=data["title"], wire=wire, command=command, answer=answer,
                      key_variable=key_variable, default_model=model, image=image, build=build, stdin=stdin,
                      default_base_url=(base_url or "").rstrip("/"), env=env, files=files,
                      suggested_grant=grant, npm_packages=npm, pypi_packages=pypi)
