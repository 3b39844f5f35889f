"""Host-side tools that are neither the control plane nor the gateway (e.g. the scripted model server)."""
