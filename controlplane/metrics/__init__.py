"""The control plane's Prometheus metrics (docs/operations.md, Metrics). The decision API's own process
(controlplane.decision_server) exports them on a listener of its own (`listener`): the decisions it
answered (`decisions`, counted in process on the decision path), the audit chain's append latency
(controlplane.audit.metrics), and what the database and the broker hold right now (`state`, read at
scrape time, never per decision). The web server exports nothing: its listener is user-facing."""
