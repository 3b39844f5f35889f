"""`python manage.py preset …`: agent presets and workers' choice of one (docs/presets.md).

    preset list                                   every preset: slug, kind, wire, image
    preset show SLUG                              one preset in file form
    preset check FILE…                            validate preset files; exit 1 naming file and key
    preset load                                   the built-in files into their rows (migrate does it too)
    preset use WORKER SLUG [--model M] [--base-url URL] [--image I] [--env NAME=VALUE …]
    preset suggest-grants WORKER --secret NAME [--save]   the preset's model grant, as TOML (or saved)
    preset build SLUG                             build a custom preset's layer from its packages
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tomli_w
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controlplane.agents import presetfiles, selectors, services, suggestions
from controlplane.agents.rendering import preset_image
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.fleet.models import Worker
from controlplane.vault.models import Secret


def _worker(name: str) -> Worker:
    worker = Worker.objects.filter(name=name).first()
    if worker is None:
        raise CommandError(f"no worker named {name!r}", returncode=1)
    return worker


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq:
            raise CommandError(f"--env {pair!r}: write NAME=VALUE", returncode=1)
        env[name] = value
    return env


class Command(BaseCommand):
    help = "Agent presets: list, show, check and load them; choose one for a worker; its suggested grant."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="every preset")
        sub.add_parser("show", help="one preset in file form").add_argument("slug")
        sub.add_parser("check", help="validate preset files (nothing is written)") \
            .add_argument("files", nargs="+", type=Path)
        sub.add_parser("load", help="load the built-in presets from their files (all or nothing)")
        use = sub.add_parser("use", help="choose a worker's preset and model (audited)")
        use.add_argument("worker")
        use.add_argument("slug")
        use.add_argument("--model", default="")
        use.add_argument("--base-url", default="")
        use.add_argument("--image", default="", help="this worker's own box image (admin-only)")
        use.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                         help="a variable for this worker's boxes (repeatable; never a secret)")
        suggest = sub.add_parser("suggest-grants", help="the worker's preset's model grant, as a grant file")
        suggest.add_argument("worker")
        suggest.add_argument("--secret", required=True, help="the vault secret holding the model key")
        suggest.add_argument("--save", action="store_true", help="save it (audited), instead of printing it")
        sub.add_parser("build", help="build a custom preset's layer from its packages").add_argument("slug")

    def handle(self, *args, action, **options):
        try:
            getattr(self, "do_" + action.replace("-", "_"))(**options)
        except ValidationFailed as exc:
            raise CommandError("\n".join(f"{k}: {v}" for k, v in exc.errors.items()), returncode=1) from None
        except presetfiles.PresetFilesInvalid as exc:
            raise CommandError("nothing loaded:\n" + "\n".join(map(str, exc.errors)), returncode=1) from None
        except RosterError as exc:
            raise CommandError(str(exc), returncode=1) from None

    def do_list(self, **_):
        self.stdout.write("SLUG\tKIND\tWIRE\tIMAGE\tTITLE")
        for preset in selectors.preset_list():
            image = preset_image(services.preset_spec(preset), settings.ROSTER_BOX_IMAGE)
            self.stdout.write(f"{preset.slug}\t{preset.kind}\t{preset.wire}\t{image}\t{preset.title}")

    def do_show(self, *, slug, **_):
        self.stdout.write(tomli_w.dumps(services.preset_data(selectors.preset_get(slug))))

    def do_check(self, *, files, **_):
        errors = []
        for path in files:
            try:
                presetfiles.load_file(path, slug=path.resolve().parent.name)
            except presetfiles.PresetFilesInvalid as exc:
                errors.extend(exc.errors)
        if errors:
            raise CommandError("\n".join(map(str, errors)), returncode=1)
        self.stdout.write(f"{len(files)} preset file(s) OK")

    def do_load(self, **_):
        summary = services.presets_sync_builtin(by="cli", via="preset load")
        for key, slugs in summary.items():
            self.stdout.write(f"{key}: {len(slugs)}" + (f" ({', '.join(slugs)})" if slugs else ""))
        if summary["orphaned"]:
            self.stderr.write("orphaned: built-in presets whose file is gone but a worker still uses; choose "
                              "another preset for those workers")

    def do_use(self, *, worker, slug, model, base_url, image, env, **_):
        agent, action = services.worker_agent_set(_worker(worker), selectors.preset_get(slug), model=model,
                                                  base_url=base_url, image=image, environment=_env_pairs(env),
                                                  by="cli", via="preset use")
        self.stdout.write(f"worker {worker}: preset {agent.preset.slug} ({action})")

    def do_suggest_grants(self, *, worker, secret, save, **_):
        found = _worker(worker)
        choice = selectors.worker_agent_choice(found)
        stored = Secret.objects.filter(name=secret).first()
        if stored is None:
            raise CommandError(f"no secret named {secret!r}; store the key with `manage.py secret set "
                               f"{secret} --kind …` first", returncode=1)
        note = suggestions.kind_note(choice, stored)
        if note:
            self.stderr.write(note)
        if save:
            grant, action = suggestions.suggested_grant_save(found, choice, secret, by="cli",
                                                             via="preset suggest-grants")
            self.stdout.write(f"grant {grant.slug}: {action}")
        else:
            self.stdout.write(suggestions.suggested_grant_toml(found, choice, secret))

    def do_build(self, *, slug, **_):
        preset = selectors.preset_get(slug)
        spec = services.preset_spec(preset)
        if not (spec.npm_packages or spec.pypi_packages):
            raise CommandError(f"preset {slug} lists no packages; its image is built by: "
                               f"{spec.build or 'its owner'}", returncode=1)
        script = settings.BASE_DIR / "workers" / "presets" / "custom-layer.sh"
        env = {**os.environ, "ROSTER_PRESET_IMAGE": preset_image(spec, settings.ROSTER_BOX_IMAGE),
               "ROSTER_BOX_IMAGE": settings.ROSTER_BOX_IMAGE, "ROSTER_PRESET_SLUG": spec.slug,
               "ROSTER_PRESET_NPM": " ".join(spec.npm_packages),
               "ROSTER_PRESET_PYPI": " ".join(spec.pypi_packages)}
        done = subprocess.run([str(script)], env=env, check=False, stdout=sys.stdout, stderr=sys.stderr)  # noqa: S603
        if done.returncode != 0:
            raise CommandError(f"building the layer of preset {slug} failed (exit {done.returncode})",
                               returncode=1)
