"""The suite never talks to a `make up` stack running on the same machine (tests/conftest.py)."""

from channels.layers import get_channel_layer
from django.conf import settings

from controlplane.celery import app
from tests.conftest import UNREACHABLE_REDIS


def test_celery_publishes_nowhere_a_stack_listens():
    assert app.conf.broker_url == UNREACHABLE_REDIS == settings.CELERY_BROKER_URL


def test_announcements_go_nowhere_a_stack_listens():
    [host] = get_channel_layer().hosts
    assert host["address"] == UNREACHABLE_REDIS
