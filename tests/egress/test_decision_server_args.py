"""The decision API's command line (controlplane.egress.server): how many processes serve it comes from
ROSTER_DECISION_PROCESSES unless --processes says otherwise, and fewer than one is refused, never
started as some other number."""

import os

import pytest
from django.conf import settings as django_settings

from controlplane.egress import server


def test_the_setting_defaults_to_one_process_per_core():
    # The test run may set it (tests/support/procs.py sets it for the servers it starts, not for itself).
    if "ROSTER_DECISION_PROCESSES" not in os.environ:
        assert django_settings.ROSTER_DECISION_PROCESSES == (os.cpu_count() or 1)


def test_processes_come_from_the_setting_unless_the_flag_says_otherwise(settings):
    settings.ROSTER_DECISION_PROCESSES = 3
    assert server._arguments([], settings).processes == 3
    assert server._arguments(["--processes", "1"], settings).processes == 1


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_fewer_than_one_process_or_not_a_number_is_refused(settings, value):
    with pytest.raises(SystemExit):
        server._arguments(["--processes", value], settings)


def test_each_worker_loads_the_same_app_by_import_string():
    module, _, name = server.PROCESS_APP.partition(":")
    assert module == server.__name__ and callable(getattr(server, name))
