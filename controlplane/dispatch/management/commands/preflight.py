"""`preflight`: the dispatcher's checks before any box starts (locked network, firewall, gateway health and
its bridge address, CA, image, box uid), run once by hand or by `make up`. Nothing is started."""

import docker
import requests
from django.core.management.base import BaseCommand, CommandError

from controlplane.dispatch import preflight
from controlplane.dispatch.engine import docker_client


class Command(BaseCommand):
    help = "Check that the dispatcher would start a box now; say why not otherwise (exit status 1)."

    def handle(self, *args, **options):
        try:
            network, image_id = preflight.preflight(docker_client())
        except preflight.PreflightRefused as exc:
            raise CommandError(str(exc)) from exc
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise CommandError(f"docker engine unavailable: {exc.__class__.__name__}") from exc
        self.stdout.write(f"preflight ok: network {network.name} locked ({network.bridge}, gateway on "
                          f"{network.gateway_ip}), image {image_id[:19]}")
