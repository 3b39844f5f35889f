from tests.egress.fixtures import *  # noqa: F403 - shared fixtures
