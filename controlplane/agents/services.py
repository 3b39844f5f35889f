"""Writing presets and workers' agent settings: every create, change and delete goes through here, is
validated (the spec's rules and the vault check: no value carries a secret) and audited `agent_change` in
the same transaction, with the values before and after."""

from __future__ import annotations

from django.db import transaction

from controlplane.agents.environment import environment_problems, vault_problems
from controlplane.agents.models import Preset, WorkerAgent
from controlplane.agents.presetfiles import PresetFilesInvalid, load_dir
from controlplane.agents.spec import IMAGE_RE, MODEL_RE, PresetSpec, base_url_problem, validate_preset
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.fleet.models import Worker

_SPEC_FIELDS = ("title", "image", "build", "wire", "stdin", "answer", "key_variable", "default_model",
                "default_base_url")


def preset_data(preset: Preset) -> dict:
    """A stored preset in file form (validate_preset reads it back)."""
    data = {name: getattr(preset, name) for name in _SPEC_FIELDS}
    data.update(slug=preset.slug, command=list(preset.command), env=dict(preset.env),
                files=list(preset.files))
    if preset.suggested_grant is not None:
        data["suggested_grant"] = dict(preset.suggested_grant)
    if preset.npm_packages:
        data["npm_packages"] = list(preset.npm_packages)
    if preset.pypi_packages:
        data["pypi_packages"] = list(preset.pypi_packages)
    return data


def preset_spec(preset: Preset) -> PresetSpec:
    """The stored preset, validated again (a row edited around the services is refused, not run)."""
    try:
        return validate_preset(preset_data(preset), custom=preset.kind == Preset.Kind.CUSTOM)
    except ValidationFailed as exc:
        raise RosterError(f"preset {preset.slug} is invalid as stored: {exc}") from None


def _vault_texts(spec: PresetSpec):
    yield from ((f"command[{i}]", arg) for i, arg in enumerate(spec.command))
    yield from ((f"env.{name}", value) for name, value in spec.env.items())
    yield from ((f"files[{i}].content", f.content) for i, f in enumerate(spec.files))


def _record(action: str, obj: str, name: str, before: dict | None, after: dict | None, *, by: str, via: str,
            worker: str | None = None) -> None:
    keys = set(before or {}) | set(after or {})
    changed = sorted(k for k in keys if (before or {}).get(k) != (after or {}).get(k))
    audit_append("agent_change", {"object": obj, "name": name, "action": action, "by": by, "via": via,
                                  "before": before, "after": after, "changed": changed}, worker=worker)


def preset_save(spec: PresetSpec, *, kind: str, by: str = "", via: str = "", source: str = "",
                source_sha256: str = "") -> tuple[Preset, str]:
    """Create or update the preset `spec.slug`: (preset, "created" | "updated" | "unchanged"). A custom
    preset never replaces a built-in one of the same slug, nor the other way round."""
    problems = vault_problems(_vault_texts(spec))
    if problems:
        raise ValidationFailed(problems)
    with transaction.atomic():
        preset = Preset.objects.select_for_update().filter(slug=spec.slug).first()
        if preset is not None and preset.kind != kind:
            raise ValidationFailed({"slug": f"{spec.slug} is a {preset.kind} preset already"})
        before = preset_data(preset) if preset else None
        if preset is None:
            preset = Preset(slug=spec.slug, kind=kind)
        data = spec.as_data()
        for name in (*_SPEC_FIELDS, "command", "env", "files"):
            setattr(preset, name, data[name])
        preset.suggested_grant = data.get("suggested_grant")
        preset.npm_packages = data.get("npm_packages", [])
        preset.pypi_packages = data.get("pypi_packages", [])
        after = preset_data(preset)
        if before == after:
            if (preset.source, preset.source_sha256) != (source, source_sha256):
                # The same preset from a moved or reformatted file: where it comes from, not what it is.
                Preset.objects.filter(pk=preset.pk).update(source=source, source_sha256=source_sha256)
            return preset, "unchanged"
        preset.source, preset.source_sha256 = source, source_sha256
        preset.save()
        action = "created" if before is None else "updated"
        # A built-in's first load is its file arriving with the code (git holds its history; the row its
        # SHA-256); what is recorded is a change under a stack that already had it, and every custom edit.
        if before != after and not (action == "created" and kind == Preset.Kind.BUILTIN):
            _record(action, "preset", preset.slug, before, after, by=by, via=via)
        return preset, action


def preset_delete(preset: Preset, *, by: str = "", via: str = "") -> None:
    with transaction.atomic():
        users = list(preset.workers.values_list("worker__name", flat=True))
        if users:
            raise RosterError(f"preset {preset.slug} is the agent of {', '.join(users)}; choose another "
                              "first")
        before = preset_data(preset)
        preset.delete()
        _record("deleted", "preset", before["slug"], before, None, by=by, via=via)


def presets_sync_builtin(*, by: str = "", via: str = "preset load") -> dict[str, list[str]]:
    """Load every built-in preset file into its row, all or nothing: a bad file changes nothing and its
    problems are raised (PresetFilesInvalid). A built-in whose file is gone is deleted, unless a worker
    still uses it (then it stays, and is reported under "orphaned")."""
    loaded = load_dir()
    if loaded.errors:
        raise PresetFilesInvalid(loaded.errors)
    summary: dict[str, list[str]] = {key: [] for key in ("created", "updated", "unchanged", "deleted",
                                                         "orphaned")}
    with transaction.atomic():
        for item in loaded.presets:
            _preset, action = preset_save(item.spec, kind=Preset.Kind.BUILTIN, by=by, via=via,
                                          source=item.source, source_sha256=item.sha256)
            summary[action].append(item.spec.slug)
        keep = {item.spec.slug for item in loaded.presets}
        for preset in Preset.objects.filter(kind=Preset.Kind.BUILTIN).exclude(slug__in=keep):
            if preset.workers.exists():
                summary["orphaned"].append(preset.slug)
            else:
                preset_delete(preset, by=by, via=via)
                summary["deleted"].append(preset.slug)
    return summary


def worker_agent_data(agent: WorkerAgent | None) -> dict | None:
    if agent is None:
        return None
    return {"preset": agent.preset.slug, "model": agent.model, "base_url": agent.base_url,
            "image": agent.image, "environment": dict(agent.environment)}


def worker_agent_problems(preset: Preset | None, *, model: str, base_url: str, image: str,
                          environment: object) -> dict[str, str]:
    """Every problem of a worker's agent settings, the vault check included; {} when they are fine."""
    problems: dict[str, str] = {}
    if preset is None:
        problems["preset"] = "choose a preset"
    if model and not MODEL_RE.match(model):
        problems["model"] = ("a model name (letters, digits and ._:/@+-, up to 200); empty: the preset's "
                             "default")
    if base_url and base_url_problem(base_url):
        problems["base_url"] = base_url_problem(base_url)
    if image and not IMAGE_RE.match(image):
        problems["image"] = "a Docker image reference, e.g. registry.example/box:1; empty: the preset's image"
    key_variable = preset.key_variable if preset is not None else ""
    problems.update(environment_problems(environment, key_variable=key_variable, field="environment"))
    if isinstance(environment, dict) and not problems:
        problems.update(vault_problems((f"environment.{k}", v) for k, v in environment.items()))
        problems.update(vault_problems((f"environment name {k}", k) for k in environment))
    return problems


def worker_agent_set(worker: Worker, preset: Preset, *, model: str = "", base_url: str = "", image: str = "",
                     environment: dict | None = None, by: str = "", via: str = "") -> tuple[WorkerAgent, str]:
    """Set a worker's agent settings (validated; audited with the values before and after)."""
    environment = {} if environment is None else environment
    base_url = base_url.rstrip("/") if isinstance(base_url, str) else base_url
    problems = worker_agent_problems(preset, model=model, base_url=base_url, image=image,
                                     environment=environment)
    if problems:
        raise ValidationFailed(problems)
    with transaction.atomic():
        agent = WorkerAgent.objects.select_for_update().select_related("preset").filter(worker=worker).first()
        before = worker_agent_data(agent)
        if agent is None:
            agent = WorkerAgent(worker=worker)
        agent.preset, agent.model, agent.base_url, agent.image = preset, model, base_url, image
        agent.environment = dict(environment)
        after = worker_agent_data(agent)
        if before == after:
            return agent, "unchanged"
        agent.save()
        action = "created" if before is None else "updated"
        _record(action, "worker_agent", worker.name, before, after, by=by, via=via, worker=worker.name)
        return agent, action


def worker_agent_clear(worker: Worker, *, by: str = "", via: str = "") -> bool:
    """Back to the reference preset and the control plane's model settings; False if there was nothing."""
    with transaction.atomic():
        agent = WorkerAgent.objects.select_for_update().select_related("preset").filter(worker=worker).first()
        if agent is None:
            return False
        before = worker_agent_data(agent)
        agent.delete()
        _record("deleted", "worker_agent", worker.name, before, None, by=by, via=via, worker=worker.name)
        return True
