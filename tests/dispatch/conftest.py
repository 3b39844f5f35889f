from __future__ import annotations

import pytest


@pytest.fixture
def gateway_ca(tmp_path, settings):
    """A stand-in public certificate (unit tests never parse it)."""
    path = tmp_path / "gateway-ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    settings.ROSTER_GATEWAY_CA_CERT = path
    settings.ROSTER_BOX_RUNS_DIR = tmp_path / "runs"
    settings.ROSTER_BOX_CODE_DIR = tmp_path / "code"
    return path
