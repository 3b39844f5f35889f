"""Fixtures for the browser tests: one daphne + gateway + upstream per module, one Chromium per module,
and per test a worker with a live run, an `ask` grant toward the upstream, and people in each role."""

from __future__ import annotations

import contextlib
import os

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group, User

from controlplane.core.roles import APPROVERS, AUDITORS, ensure_roles
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.browser import harness
from tests.support import procs

LOGIN_PASSWORD = "browser-test-password-1"
# Held long enough for a person (the test) to decide on a loaded 2-core machine.
DEFAULT_TTL_SECONDS = 60


@pytest.fixture(scope="module")
def approval_ttl_seconds() -> int:
    return DEFAULT_TTL_SECONDS


@pytest.fixture(scope="module")
def approval_hold_seconds() -> int | None:
    """The box's own wait; None: past the approval's life (harness.control_plane_env)."""
    return None


@pytest.fixture(scope="session")
def _stacks(django_db_setup, redis_url, tmp_path_factory):
    """One running stack per approval TTL (and box hold), shared by every module that wants it."""
    from tests.support.gateway import gateway_process

    running: dict[tuple[int, int | None], dict] = {}
    with contextlib.ExitStack() as exits:
        def start(ttl: int, hold: int | None = None) -> dict:
            if (ttl, hold) not in running:
                tmp = tmp_path_factory.mktemp(f"browser-stack-ttl{ttl}-hold{hold}")
                db_name = str(django_settings.DATABASES["default"]["NAME"])
                env = harness.control_plane_env(db_name, redis_url, GATEWAY_SERVICE_TOKEN, ttl, hold)
                upstream = harness.UpstreamServer()
                exits.callback(upstream.close)
                base_url = exits.enter_context(procs.daphne_server(env, tmp))
                procs.wait_for_http(base_url + "/accounts/login/", timeout=30)
                gateway = exits.enter_context(gateway_process(
                    base_url, GATEWAY_SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
                    hold_seconds=ttl + 30))
                running[(ttl, hold)] = {"base_url": base_url, "gateway": gateway, "upstream": upstream,
                                        "tmp": tmp}
            return running[(ttl, hold)]

        yield start


@pytest.fixture(scope="module")
def stack(_stacks, approval_ttl_seconds, approval_hold_seconds):
    return _stacks(approval_ttl_seconds, approval_hold_seconds)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # around it are ordinary blocking calls (Django would otherwise refuse them).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=harness.CHROMIUM, headless=True,
                                          args=harness.CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def settings_for_stack(settings, redis_url):
    # Anything this process broadcasts goes through the same Redis the server listens on.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [redis_url]}}}
    return settings


def _person(name: str, group: str | None, password: str | None = None) -> User:
    user = User.objects.create_user(name, password=password)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def world(transactional_db, settings_for_stack, stack):
    ensure_roles()
    worker = worker_create("mailer", description="sends the weekly digest")
    run, token = run_create(worker, command=["digest"])
    run_set_status(run.pk, Run.Status.RUNNING)
    # This process is the run's "box": it dials the gateway over loopback, and a token is accepted only
    # from its box's address.
    Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")
    grant = Grant.objects.create(
        slug="upstream-post-ask", worker=worker, methods=["POST"], schemes=["http"], host="127.0.0.1",
        port=stack["upstream"].port, mode=Grant.Mode.ASK, untrusted=False, cost_per_call=1500,
    )
    return {
        **stack, "worker": worker, "run": run, "token": token, "grant": grant,
        "alice": _person("alice", APPROVERS, LOGIN_PASSWORD), "bob": _person("bob", APPROVERS),
        "carol": _person("carol", AUDITORS),
    }


@pytest.fixture
def page_for(browser, world):
    """page_for(user) -> a Playwright page signed in as that user, closed after the test."""
    contexts = []

    def open_page(user, path: str = "/approvals/"):
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        context.add_cookies([harness.session_cookie(user, world["base_url"])])
        contexts.append(context)
        page = context.new_page()
        page.goto(world["base_url"] + path)
        if path.startswith("/approvals/"):
            page.wait_for_selector('#live-state[data-state="open"]', timeout=15000)
        return page

    yield open_page
    for context in contexts:
        context.close()


def hold(world, body: bytes = b"hello", path: str = "/v1/send?to=team",
         headers: dict[str, str] | None = None) -> harness.HeldRequest:
    url = f"http://127.0.0.1:{world['upstream'].port}{path}"
    return harness.HeldRequest(world["gateway"].proxy_url_with(world["token"]), url, body,
                               headers=headers or {}).start()
