"""The box fixtures (tests/integration/boxes/conftest.py: a locked network, the real gateway, the control
plane), and each preset's image layer built once per session on the test box image."""

from __future__ import annotations

import pytest

from tests.integration.agents.presets import preset_image_build
from tests.integration.boxes import conftest as boxes

# The box tests' fixtures, here too (a conftest's fixtures reach only its own directory).
box_site, box_stack, docker_client, stack = boxes.box_site, boxes.box_stack, boxes.docker_client, boxes.stack


@pytest.fixture(scope="session")
def preset_images(box_site):
    built: dict[str, str] = {}

    def build(slug: str) -> str:
        if slug not in built:
            built[slug], _ = preset_image_build(slug, box_site.image)
        return built[slug]

    return build
