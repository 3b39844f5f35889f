"""`python -m controlplane.relay`: the relay process (controlplane.relay.process)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from controlplane.relay.process import main  # noqa: E402

main()
