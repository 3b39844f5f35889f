"""Dispatch: Celery tasks that put runs into network-locked Docker boxes, the preflight that refuses to
start a box on an open network, and the reaper that reconciles runs after a restart."""
