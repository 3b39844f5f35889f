"""The settings the gateway shares with the control plane (docs/settings.md, "Shared by the gateway and the
control plane"). The gateway must never send more than the decision API accepts (its outcome batches
would be refused and their bytes never charged; its requests denied for the wrong reason), never hold an
asked request for less than the control plane's hold, and answer for proposals the very name the boxes
are told. Both sides default to the same values (pinned by tests/contract/health.json, which both test);
an operator can still set one side only, so the gateway checks.

The control plane's health answer carries its side (`limits`, docs/wire.md GET /health). The addon
checks when it starts and on every health probe; while anything disagrees, or the control plane does not
say, the gateway's health is 503 naming each disagreement, and every request is refused with a 503."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from roster_gateway.options import GatewayConfig

log = logging.getLogger("roster_gateway")

AT_MOST, AT_LEAST, SAME = "at most", "at least", "the same as"


@dataclass(frozen=True)
class SharedSetting:
    option: str  # the gateway's option; its GatewayConfig field is the name without `roster_`
    setting: str  # the control plane's setting
    key: str  # its name in the health answer's limits
    rule: str  # what the gateway's value must be, compared with the control plane's

    def holds(self, mine: int | str, theirs: int | str) -> bool:
        if self.rule == AT_MOST:
            return mine <= theirs
        if self.rule == AT_LEAST:
            return mine >= theirs
        return mine == theirs


SHARED = (
    SharedSetting("roster_outcome_batch_max", "ROSTER_OUTCOME_BATCH_MAX", "outcome_batch_max", AT_MOST),
    SharedSetting("roster_approval_poll_seconds", "ROSTER_APPROVAL_WAIT_MAX_SECONDS",
                  "approval_wait_max_seconds", AT_MOST),
    SharedSetting("roster_hold_seconds", "ROSTER_APPROVAL_HOLD_SECONDS", "approval_hold_seconds", AT_LEAST),
    SharedSetting("roster_body_preview_bytes", "ROSTER_BODY_PREVIEW_BYTES", "body_preview_bytes", AT_MOST),
    SharedSetting("roster_max_target_bytes", "ROSTER_DECIDE_MAX_PATH_BYTES", "decide_max_path_bytes",
                  AT_MOST),
    SharedSetting("roster_max_headers", "ROSTER_DECIDE_MAX_HEADERS", "decide_max_headers", AT_MOST),
    SharedSetting("roster_max_header_bytes", "ROSTER_DECIDE_MAX_HEADER_BYTES", "decide_max_header_bytes",
                  AT_MOST),
    SharedSetting("roster_budget_wait_ms", "ROSTER_BUDGET_WAIT_MS", "budget_wait_ms", AT_LEAST),
    SharedSetting("roster_proposals_host", "ROSTER_PROPOSALS_HOST", "proposals_host", SAME),
)


def disagreements(config: GatewayConfig, limits: object) -> tuple[str, ...]:
    """Each shared setting on which the gateway's options and the control plane's limits disagree, in words
    an operator can act on; a limit missing or of the wrong type is a disagreement too."""
    if not isinstance(limits, dict):
        return ("the control plane's health answer carries no limits (docs/wire.md GET /health)",)
    found = []
    for shared in SHARED:
        mine = getattr(config, shared.option.removeprefix("roster_"))
        theirs = limits.get(shared.key)
        if type(theirs) is not type(mine):  # bool is not int here: True is no batch size
            found.append(f"the control plane's health answer does not say its {shared.setting} "
                         f"(limits.{shared.key})")
        elif not shared.holds(mine, theirs):
            found.append(f"{shared.option} is {mine!r}: it must be {shared.rule} the control plane's "
                         f"{shared.setting} ({theirs!r})")
    return tuple(found)


class SharedLimits:
    """What the gateway last learnt of the control plane's side; `problems` is None until it first answered
    (the control plane judges every request then anyway: one it cannot reach is a deny)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.problems: tuple[str, ...] | None = None

    @property
    def checked(self) -> bool:
        return self.problems is not None

    def note(self, answered: bool, limits: object) -> None:
        """Judge one health answer; an unanswered probe teaches nothing and changes nothing."""
        if not answered:
            return
        problems = disagreements(self.config, limits)
        if problems and problems != self.problems:
            log.error("the gateway's settings disagree with the control plane's; every request is refused "
                      "until they agree: %s", "; ".join(problems))
        elif not problems and self.problems:
            log.warning("the gateway's settings agree with the control plane's again")
        self.problems = problems

    def refusal(self) -> str | None:
        """Why requests are refused now, for the box (the details are on /healthz and in the log)."""
        if not self.problems:
            return None
        return "the gateway's settings disagree with the control plane's; an operator must align them"
