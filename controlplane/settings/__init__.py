"""The control plane's settings (DJANGO_SETTINGS_MODULE=controlplane.settings), one module per area, each
read from the environment through controlplane.core.env. Every ROSTER_* name is in docs/settings.md (name,
default, what it does, which process reads it); `make lint` (scripts/check_settings_documented.py) fails
when the code reads one the table lacks, or the table names one nothing reads.

Defaults suit one machine: SQLite under var/, Redis on loopback. A new setting goes into the module of its
area, with a comment saying why it exists, and a row in docs/settings.md."""

from controlplane.settings.agent import *  # noqa: F403
from controlplane.settings.approvals import *  # noqa: F403
from controlplane.settings.audit import *  # noqa: F403
from controlplane.settings.base import *  # noqa: F403
from controlplane.settings.conversations import *  # noqa: F403
from controlplane.settings.database import *  # noqa: F403
from controlplane.settings.egress import *  # noqa: F403
from controlplane.settings.framework import *  # noqa: F403
from controlplane.settings.journal import *  # noqa: F403
from controlplane.settings.knowledge import *  # noqa: F403
from controlplane.settings.ledger import *  # noqa: F403
from controlplane.settings.memory import *  # noqa: F403
from controlplane.settings.policy import *  # noqa: F403
from controlplane.settings.presets import *  # noqa: F403
from controlplane.settings.proposals import *  # noqa: F403
from controlplane.settings.queues import *  # noqa: F403
from controlplane.settings.runs import *  # noqa: F403
from controlplane.settings.vault import *  # noqa: F403
from controlplane.settings.web import *  # noqa: F403
