"""Before a box starts: the network must be locked and the gateway must answer. Any failure is a refusal
with a reason a person can act on; nothing starts (the dispatcher refuses rather than run open)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import docker
import httpx
from django.conf import settings

from controlplane.core.errors import RosterError
from controlplane.dispatch.firewall import firewall_problem

ICC_OPTION = "com.docker.network.bridge.enable_icc"
BRIDGE_OPTION = "com.docker.network.bridge.name"


@dataclass(frozen=True)
class BoxNetwork:
    name: str
    bridge: str
    gateway_ip: str  # the host's address on the bridge, where the gateway listens


class PreflightRefused(RosterError):
    """Carries why the box must not start; the message is recorded on the run."""


def network_check(client: docker.DockerClient, name: str) -> BoxNetwork:
    try:
        attrs = client.networks.get(name).attrs
    except docker.errors.NotFound as exc:
        raise PreflightRefused(f"box network {name} does not exist (run scripts/network-setup.sh)") from exc
    if attrs.get("Driver") != "bridge":
        raise PreflightRefused(f"box network {name} is not a bridge network")
    if attrs.get("Internal") is not True:
        raise PreflightRefused(f"box network {name} is not internal: boxes could reach the internet")
    options = attrs.get("Options") or {}
    if options.get(ICC_OPTION) != "false":
        raise PreflightRefused(f"box network {name} allows traffic between boxes ({ICC_OPTION} is not false)")
    bridge = options.get(BRIDGE_OPTION, "")
    if not bridge:
        raise PreflightRefused(f"box network {name} has no dedicated bridge name ({BRIDGE_OPTION})")
    configs = (attrs.get("IPAM") or {}).get("Config") or []
    gateway_ip = next((c.get("Gateway") for c in configs if c.get("Gateway") and ":" not in c["Gateway"]), "")
    if not gateway_ip:
        raise PreflightRefused(f"box network {name} has no IPv4 bridge address")
    if attrs.get("EnableIPv6"):
        raise PreflightRefused(f"box network {name} has IPv6 enabled; only the IPv4 gateway port is locked")
    return BoxNetwork(name=name, bridge=bridge, gateway_ip=gateway_ip)


def _disagreements(answer: httpx.Response) -> str:
    """The settings the gateway says it and the control plane disagree on (docs/settings.md), if any."""
    try:
        found = answer.json().get("disagreements")
    except (ValueError, AttributeError):
        return ""
    return (": its settings disagree with the control plane's: " + "; ".join(map(str, found))) if (
        isinstance(found, list) and found) else ""


def gateway_check(network: BoxNetwork) -> None:
    url = settings.ROSTER_GATEWAY_HEALTH_URL
    timeout = settings.ROSTER_PREFLIGHT_TIMEOUT_SECONDS
    try:
        answer = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        raise PreflightRefused(f"gateway health check {url} failed: {exc.__class__.__name__}") from exc
    if answer.status_code != 200:
        raise PreflightRefused(f"gateway health check {url} answered {answer.status_code}"
                               + _disagreements(answer))
    port = settings.ROSTER_GATEWAY_PORT
    try:
        with socket.create_connection((network.gateway_ip, port), timeout=timeout):
            pass
    except OSError as exc:
        where = f"{network.gateway_ip}:{port}"
        raise PreflightRefused(f"gateway is not listening on the bridge address {where} ({exc})") from exc


def image_check(client: docker.DockerClient, image: str) -> str:
    try:
        return client.images.get(image).id
    except docker.errors.ImageNotFound as exc:
        raise PreflightRefused(f"box image {image} is missing (run workers/build.sh)") from exc


def ca_check() -> None:
    path = settings.ROSTER_GATEWAY_CA_CERT
    try:
        text = path.read_text()
    except OSError as exc:
        raise PreflightRefused(f"gateway CA certificate {path} is unreadable") from exc
    if "BEGIN CERTIFICATE" not in text or "PRIVATE KEY" in text:
        raise PreflightRefused(f"gateway CA file {path} is not a lone public certificate")


def uid_check() -> None:
    """The box's uid must be nobody on the trusted side: not the vault key's owner, not root, not us."""
    uid = settings.ROSTER_BOX_UID
    try:
        key_owner = settings.ROSTER_VAULT_KEY_FILE.stat().st_uid
    except OSError:
        key_owner = None  # this process has no vault key to protect
    if uid == key_owner:
        raise PreflightRefused(f"box user {uid} owns the vault key {settings.ROSTER_VAULT_KEY_FILE}; "
                               "set ROSTER_BOX_UID to a uid nothing on the host runs as")
    if uid in (0, os.getuid()):
        raise PreflightRefused(f"box user {uid} is root or the dispatcher's own user; set ROSTER_BOX_UID "
                               "to a uid nothing on the host runs as")


def preflight(client: docker.DockerClient) -> tuple[BoxNetwork, str]:
    """The locked network and the box image id, or PreflightRefused saying why not."""
    uid_check()
    network = network_check(client, settings.ROSTER_BOX_NETWORK)
    problem = firewall_problem(network.bridge, network.gateway_ip, settings.ROSTER_GATEWAY_PORT)
    if problem:
        raise PreflightRefused(problem)
    gateway_check(network)
    ca_check()
    return network, image_check(client, settings.ROSTER_BOX_IMAGE)
