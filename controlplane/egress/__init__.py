"""Everything the gateway talks to (docs/wire.md): the API's schemas and routes, the decision service
split by job (request facts, the policy cache, deciding, concluding an approval, outcomes), the mapping
of its answers to the wire, and the decision API's own ASGI entry and server. Grants, matching and the
policy engine itself live in controlplane.policy; this app only asks the engine and records its answer."""
