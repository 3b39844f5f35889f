import itertools

import pytest

from controlplane.fleet.models import Run

_ids = itertools.count(1)


@pytest.fixture
def run(worker):
    return Run.objects.create(worker=worker)


@pytest.fixture
def new_decision_id():
    return lambda: f"dc_test_{next(_ids)}"
