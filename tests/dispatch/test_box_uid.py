"""The box's user is nobody the trusted side runs as: a box process that gets a look at the host's files
(a runtime escape such as a leaked host file descriptor) must not be the owner of the vault key."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from controlplane.dispatch.preflight import PreflightRefused, uid_check

REPO = Path(__file__).resolve().parents[2]


def _image_uids() -> set[int]:
    uids = set()
    for dockerfile in (REPO / "Dockerfile", REPO / "gateway" / "Dockerfile"):
        uids |= {int(u) for u in re.findall(r"--uid\s+(\d+)", dockerfile.read_text())}
    return uids


def test_default_box_uid_is_not_a_trusted_images_user(settings):
    trusted = _image_uids()
    assert trusted, "the trusted images name their users"
    assert settings.ROSTER_BOX_UID not in trusted | {0}
    built = re.search(r"ARG BOX_UID=(\d+)", (REPO / "workers" / "Dockerfile").read_text())
    assert int(built.group(1)) == settings.ROSTER_BOX_UID  # the image's box user is the uid boxes run as


def test_box_uid_owning_the_vault_key_is_refused(tmp_path, settings):
    key = tmp_path / "vault.key"
    key.write_text("k")
    settings.ROSTER_VAULT_KEY_FILE = key
    settings.ROSTER_BOX_UID = key.stat().st_uid + 1 if key.stat().st_uid else 4242
    if settings.ROSTER_BOX_UID == os.getuid():
        settings.ROSTER_BOX_UID += 1
    uid_check()  # a different uid passes
    settings.ROSTER_BOX_UID = key.stat().st_uid
    with pytest.raises(PreflightRefused, match="vault key"):
        uid_check()


def test_box_uid_of_root_or_of_the_dispatcher_is_refused(tmp_path, settings):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "absent.key"
    for uid in {0, os.getuid()}:
        settings.ROSTER_BOX_UID = uid
        with pytest.raises(PreflightRefused, match="box user"):
            uid_check()
