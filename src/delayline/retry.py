"""Consumer retry schedules. The default is RocketMQ's: 16 retries, 10 s to 2 h apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from delayline.errors import ValidationError
from delayline.timing import LEVELS_MS

#: RocketMQ's consumer retry intervals: delay levels 3..18 (10s 30s 1m 2m ... 1h 2h).
ROCKETMQ_RETRY_DELAYS_MS: tuple[int, ...] = LEVELS_MS[2:]


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before each retry, in ms: retry n (1-based) waits ``delays_ms[n - 1]``.

    A message whose retries are used up goes to ``<topic>.DLQ``.
    """

    delays_ms: tuple[int, ...] = ROCKETMQ_RETRY_DELAYS_MS

    def __init__(self, delays_ms: Sequence[int] = ROCKETMQ_RETRY_DELAYS_MS) -> None:
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in delays_ms):
            raise ValidationError("delays_ms", "range", "retry delays must be integers >= 0 ms")
        object.__setattr__(self, "delays_ms", tuple(delays_ms))

    @property
    def max_retries(self) -> int:
        """How many times a message may be retried before it is dead-lettered."""
        return len(self.delays_ms)

    @property
    def used_up(self) -> str:
        """The reason a dead letter gives once every retry is used."""
        return f"no retries left after {self.max_retries}"

    def delay_after(self, attempt: int) -> int | None:
        """The delay (ms) before the retry that follows delivery ``attempt``; None: no more."""
        if attempt > self.max_retries:
            return None
        return self.delays_ms[attempt - 1]
