"""The decision API's replicas (roster_control_plane: one URL or several, comma-separated), and which to
ask next. Each call goes to a live replica, in turn; one that failed (no connection, no answer in its
share of the deadline, a 5xx) is skipped for roster_control_plane_backoff_ms (doubled while it keeps
failing, up to 8 times), then asked again. A replica in back-off is still tried after every live one has
failed, so a call is denied only when no replica answers, never because the gateway remembered a failure
that has since been mended."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

MAX_BACKOFF_STEPS = 3  # 1 s, 2 s, 4 s, then 8 s at roster_control_plane_backoff_ms=1000


class Transport(Protocol):
    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]: ...

    async def close(self) -> None: ...


@dataclass
class Replica:
    url: str
    transport: Transport
    down_until: float = 0.0  # time.monotonic() before which it is skipped while others are live
    failures: int = field(default=0)


class Replicas:
    def __init__(self, replicas: Sequence[Replica], backoff: float) -> None:
        if not replicas:
            raise ValueError("at least one decision API replica")
        self.replicas = list(replicas)
        self.backoff = backoff
        self._next = 0

    def __len__(self) -> int:
        return len(self.replicas)

    def order(self) -> list[Replica]:
        """Who to ask, first to last: live replicas in turn (so load is shared), then those in back-off,
        the one whose back-off ends first ahead."""
        if len(self.replicas) == 1:
            return list(self.replicas)  # one decision API: always it
        now = time.monotonic()
        start, n = self._next, len(self.replicas)
        self._next = (start + 1) % n
        turn = [self.replicas[(start + i) % n] for i in range(n)]
        live = [r for r in turn if r.down_until <= now]
        resting = sorted((r for r in turn if r.down_until > now), key=lambda r: r.down_until)
        return live + resting

    def failed(self, replica: Replica) -> None:
        # Doubled for each failure in a row, up to MAX_BACKOFF_STEPS: a replica that stays down costs the
        # calls that try it again ever more rarely, one that comes back is asked within a few seconds.
        replica.failures += 1
        steps = min(replica.failures - 1, MAX_BACKOFF_STEPS)
        replica.down_until = time.monotonic() + self.backoff * 2 ** steps

    @staticmethod
    def answered(replica: Replica) -> None:
        replica.failures = 0
        replica.down_until = 0.0

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.transport.close()
