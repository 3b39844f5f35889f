"""The finest time step that keeps a picture under its bucket budget, and only known steps."""

import datetime as dt

import pytest

from controlplane.core.timebuckets import step_for, truncate

T0 = dt.datetime(2026, 3, 15, tzinfo=dt.UTC)


@pytest.mark.parametrize(("span", "step"), [
    (dt.timedelta(0), "second"), (dt.timedelta(seconds=240), "second"), (dt.timedelta(seconds=241), "minute"),
    (dt.timedelta(hours=4), "minute"), (dt.timedelta(hours=23), "hour"), (dt.timedelta(days=31), "day"),
    (dt.timedelta(days=400), "month"), (dt.timedelta(days=40_000), "month"),
    (-dt.timedelta(hours=1), "second"),  # a clock that went back: no negative span
])
def test_step_for(span, step):
    assert step_for(T0, T0 + span) == step


def test_unknown_step_is_an_error():
    with pytest.raises(ValueError):
        truncate("created_at", "fortnight")
