"""Entry point for `mitmdump -s gateway/roster_gateway/script.py`."""

from roster_gateway.addon import Gateway

addons = [Gateway()]
