"""Ledger: budgets under concurrency (docs/operations.md, "Budgets under concurrency")."""

from controlplane.core.env import env

# A call refused only because calls still in flight hold the cap's remainder at their worst case (not
# spent: they release what they do not use when they settle) waits for them this long on the decision
# API, asynchronously, holding no database lock; past it, 402 "held by N calls in flight". 0: refuse at
# once. The gateway's roster_budget_wait_ms must be at least this: its /decide timeout adds it.
ROSTER_BUDGET_WAIT_MS = env.int("ROSTER_BUDGET_WAIT_MS", 30_000, minimum=0)
# While waiting, the budget is read again at least this often even when no outcome settled in this
# process (one settled elsewhere: another decision API process, the reaper).
ROSTER_BUDGET_WAIT_POLL_MS = env.int("ROSTER_BUDGET_WAIT_POLL_MS", 500, minimum=10)
# A reservation with no outcome this long after it was made is settled at its worst case, flagged (the
# gateway lost the outcome, or the decision API crashed before it arrived); until then it counts as in
# flight.
ROSTER_RESERVATION_DEADLINE_SECONDS = env.int("ROSTER_RESERVATION_DEADLINE_SECONDS", 3600, minimum=60)
