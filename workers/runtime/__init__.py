"""The runtime inside the box: starts the run's command (an agent loop entrypoint or any program).
It enforces nothing that matters: the network, the mounts and the gateway do. It only refuses to start
in a box that is plainly misconfigured, so a mistake on the trusted side shows up loudly."""
