"""configuration.py: mitmproxy options under which the gateway would run open or record secrets are
refused, and the settings its guarantees depend on are pinned whatever was asked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons
from roster_gateway import configuration
from roster_gateway.addon import Gateway

from tests.conftest import CP_URL, FakeControlPlane


def _proxy_context(tmp_path):
    """A Gateway beside the mitmproxy addons that register the proxy-server and recording options."""
    from mitmproxy.addons import dumper, save
    from mitmproxy.addons.proxyserver import Proxyserver

    addon = Gateway(transport=FakeControlPlane())
    path = tmp_path / "tok"
    path.write_text("svc")
    path.chmod(0o600)
    base = dict(roster_control_plane=CP_URL, roster_service_token_file=str(path))
    return addon, taddons.context(Proxyserver(), save.Save(), dumper.Dumper(), addon), base


@pytest.mark.parametrize("option,says", [({"ssl_insecure": True}, "certificate checks"),
                                         ({"ignore_hosts": [".*"]}, "bypass"),
                                         ({"save_stream_file": "flows.mitm"}, "record secret"),
                                         ({"flow_detail": 3}, "record secret"),
                                         ({"mode": ["socks5"]}, "regular HTTP proxy")])
def test_options_that_would_bypass_or_leak_are_refused(tmp_path, option, says):
    if "save_stream_file" in option:
        option = {"save_stream_file": str(tmp_path / "flows.mitm")}
    addon, context, base = _proxy_context(tmp_path)
    with context as tctx:
        tctx.configure(addon, **base)
        with pytest.raises(exceptions.OptionsError, match=says):
            tctx.configure(addon, **option)
        [(name, value)] = option.items()
        assert getattr(tctx.options, name) != value  # rolled back: the gateway keeps its safe settings


def test_required_settings_are_pinned_whatever_was_asked(tmp_path):
    addon, context, base = _proxy_context(tmp_path)
    with context as tctx:
        tctx.configure(addon, **base, roster_max_body_bytes=1234, connection_strategy="eager",
                       upstream_cert=True, http3=True)
        options = tctx.options
        assert (options.connection_strategy, options.upstream_cert, options.http3) == ("lazy", False, False)
        assert options.validate_inbound_headers is True
        assert options.body_size_limit == "1234"
        tctx.options.update(connection_strategy="eager")  # a later change is undone too
        assert options.connection_strategy == "lazy"


def test_a_regular_proxy_on_any_listener_passes():
    opts = SimpleNamespace(ssl_insecure=False, flow_detail=1, mode=["regular", "regular@127.0.0.1:8080"])
    configuration.refuse_unsafe_options(opts)  # no error
    with pytest.raises(exceptions.OptionsError, match="regular HTTP proxy"):
        configuration.refuse_unsafe_options(SimpleNamespace(mode=["regular", "reverse:http://cp.test"]))


@pytest.mark.parametrize("updated,rebuilds", [({"roster_hold_seconds"}, True), ({"listen_port"}, True),
                                              ({"mode"}, True), ({"flow_detail"}, False), (set(), False)])
def test_only_options_the_config_is_built_from_rebuild_it(updated, rebuilds):
    assert configuration.changes_config(updated) is rebuilds


def test_a_new_configuration_gets_new_parts(tmp_path):
    addon, context, base = _proxy_context(tmp_path)
    with context as tctx:
        tctx.configure(addon, **base)
        first = addon.steps
        assert (first.config, first.client, first.vetting) == (addon.config, addon.client, addon.vetting)
        tctx.configure(addon, roster_hold_seconds=7)
        assert addon.steps is not first and addon.steps.config.hold_seconds == 7
        assert addon.client is addon.steps.client and addon.outcomes is addon.steps.outcomes
