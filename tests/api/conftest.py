from tests.api.fixtures import *  # noqa: F403 - shared fixtures
