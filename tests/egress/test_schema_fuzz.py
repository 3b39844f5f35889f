"""Fuzz the served OpenAPI schema (/api/openapi.json) of the gateway routes with the service token:
never a 5xx, schema-invalid input is refused, and every answer conforms to the schema."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
)

CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance, negative_data_rejection]


# Loading the schema needs no database; the calls run inside each test's database transaction.
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application()).include(
    path_regex=r"^/api/gateway/")


@pytest.fixture
def keep_test_connection():
    """As django.test.Client does: the raw WSGI app must not close the test's database connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_gateway_api_fuzz(case, gateway_auth, db, keep_test_connection):
    response = case.call(headers=gateway_auth)
    case.validate_response(response, checks=CHECKS)
