"""`python -m controlplane.decision_server`: the decision API's own process, as scripts/up.sh and
compose.yaml start it. The server itself is controlplane.egress.server."""

from controlplane.egress.server import main

if __name__ == "__main__":
    main()
