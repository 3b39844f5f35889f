"""A real Matrix homeserver (Synapse, from PyPI, in its own virtualenv) on a free loopback port, for the
tests and `make demo`: SQLite, offline, no federation."""
