# Roster. `make up` starts the control plane; `make test` runs everything CI runs.
PY := .venv/bin/python
GPY := gateway/.venv/bin/python
export PYTHONDONTWRITEBYTECODE := 1
# The box image the tests build and use: a tag of this checkout's own (its path's digest), so another
# checkout on the same dockerd (each builds its own client packages into the image) never swaps it, or
# the preset layers built on it, under this one's running tests. Set it to choose another.
export ROSTER_TEST_BOX_IMAGE ?= roster-box:test-$(shell printf %s "$(CURDIR)" | sha256sum | cut -c1-10)

.PHONY: deps up down test test-fast test-gateway test-compose lint bench migrate demo

deps:
	scripts/bootstrap.sh

migrate: deps
	$(PY) manage.py migrate --noinput

up: deps migrate
	scripts/up.sh

down:
	scripts/down.sh

# The reference agent on real traffic (scripts/demo.sh); AGENT=pi|claude-code|codex|opencode|gemini-cli: that
# preset's agent instead. The default stack is machine-wide, hence the lock.
demo: deps migrate
	AGENT=$(AGENT) flock /tmp/roster-default-stack.lock scripts/demo.sh

lint: deps
	.venv/bin/ruff check controlplane tests workers tools gateway/roster_gateway gateway/tests scripts bench
	PYTHONPATH=.:gateway .venv/bin/lint-imports
	$(PY) scripts/check_file_lengths.py
	$(PY) scripts/check_dependencies_documented.py
	$(PY) scripts/check_settings_documented.py

# Unit tests only: no Docker, no browser, no external processes beyond what a unit needs.
test-fast: deps
	$(PY) -m pytest -q -m "not integration" -n 2 --timeout 120
	cd gateway && .venv/bin/python -m pytest -q -m "not integration"

test-gateway: deps
	cd gateway && .venv/bin/python -m pytest -q

# compose.yaml and compose.box-host.yaml brought up for real with the compose tool (Docker; images built
# locally, from debootstrap where no registry answers); removes every container, network and volume it made.
test-compose: deps
	$(PY) -m pytest -q -m compose tests/integration/compose

test: deps lint
	$(PY) -m pytest -q -m "not integration" -n 2 --timeout 120
	cd gateway && .venv/bin/python -m pytest -q
	$(PY) -m pytest -q -m "integration and not compose"
	$(MAKE) --no-print-directory test-compose
	DEMO_AUTO_APPROVE=1 $(MAKE) --no-print-directory demo

bench: deps migrate
	$(PY) -m bench
