"""Each preset's image layer, as built by its build.sh on the test box image: a rebuild with nothing
changed is a no-op, the layer adds nothing the box user can write and no credential, it is stamped with
the package versions it holds, and the agent's binary runs as the box user on a read-only root with no
network at all."""

from __future__ import annotations

import re

import pytest

from tests.integration.agents.presets import PRESETS, preset_image_build, preset_load

pytestmark = [pytest.mark.integration, pytest.mark.docker]

# Presets with a layer of their own (the reference agent lives in the base box image, tested by the box
# suites).
SLUGS = sorted(p.parent.name for p in PRESETS.glob("*/preset.toml")
               if preset_load(p.parent.name).get("build"))
# Paths a process may write in any box, the base image's own (a tmpfs covers each at run time, and the
# root is mounted read-only): the layer must add none.
WRITABLE = "find / -xdev -writable ! -path '/proc/*' ! -path '/sys/*' ! -path '/dev/*' 2>/dev/null | sort"
VERSION_COMMANDS = {"pi": "pi --version", "claude-code": "claude --version", "codex": "codex --version",
                    "opencode": "opencode --version", "gemini-cli": "gemini --version"}


_BASE_WRITABLE: dict[str, str] = {}


def _in_image(docker_client, image: str, script: str) -> str:
    out = docker_client.containers.run(
        image, ["-c", script], entrypoint="/bin/sh", user="box", network_mode="none", read_only=True,
        tmpfs={"/tmp": "rw,size=64m", "/workspace": "rw,size=64m,uid=10100,gid=10100"},  # noqa: S108 - in the box
        environment={"HOME": "/workspace"}, remove=True, stdout=True, stderr=True)
    return out.decode()


@pytest.mark.parametrize("slug", SLUGS)
def test_preset_image_is_cached_read_only_and_keyless(slug, box_site, docker_client, preset_images):
    image = preset_images(slug)
    again, said = preset_image_build(slug, box_site.image)
    assert again == image and said == f"preset image {image} up to date", said

    config = docker_client.images.get(image).attrs["Config"]
    labels = config["Labels"] or {}
    pinned = preset_load(slug)
    assert len(labels.get("org.roster.preset.stamp", "")) == 64
    assert labels.get("org.roster.preset.packages"), labels
    credential = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
    assert not [v for v in config.get("Env") or [] if credential.search(v.split("=", 1)[0])], config["Env"]
    assert pinned["image"].rsplit(":", 1)[0] == image.rsplit(":", 1)[0]

    if box_site.image not in _BASE_WRITABLE:
        _BASE_WRITABLE[box_site.image] = _in_image(docker_client, box_site.image, WRITABLE)
    assert _in_image(docker_client, image, WRITABLE) == _BASE_WRITABLE[box_site.image]
    version = _in_image(docker_client, image, f"{VERSION_COMMANDS[slug]} && echo ran-ok")
    assert version.rstrip().endswith("ran-ok"), version
