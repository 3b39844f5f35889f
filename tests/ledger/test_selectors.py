import pytest

from controlplane.ledger import services
from controlplane.ledger.models import Cap
from controlplane.ledger.selectors import cap_statuses, exceeded_caps
from controlplane.ledger.types import CapStatus

pytestmark = pytest.mark.django_db


def test_exceeded_caps_and_statuses(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=2)
    Cap.objects.create(worker=None, unit="micro", window="all", limit=1000)
    assert exceeded_caps(worker) == []
    for _ in range(2):
        services.reserve(worker=worker, run=run, grant_slug="g", decision_id=new_decision_id(),
                         cost_micro=10, origin="proactive")
    assert exceeded_caps(worker) == [CapStatus("worker:alpha", "requests", "day", 2, 2)]
    assert cap_statuses() == [CapStatus("org", "micro", "all", 1000, 20),
                              CapStatus("worker:alpha", "requests", "day", 2, 2)]
