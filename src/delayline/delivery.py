"""A message as a consumer receives it, and what the consumer can do with it.

The data and the plans live here once; :class:`delayline.client.Delivery` and
:class:`delayline.async_client.AsyncDelivery` only execute the plans.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from delayline import timing
from delayline.errors import ValidationError
from delayline.plans import Plan, consuming
from delayline.plans.consuming import Entry
from delayline.plans.producing import Published
from delayline.retry import RetryPolicy
from delayline.timing import from_epoch_ms
from delayline.validation import Limits, delay_ms_of


@dataclass(frozen=True)
class DeliveryBase:
    """A delivered message. Times are aware UTC datetimes."""

    entry: Entry
    retry_policy: RetryPolicy
    limits: Limits

    @property
    def id(self) -> str:
        """The message id (not the stream entry id, which is ``entry.entry_id``)."""
        return self.entry.text("id")

    @property
    def topic(self) -> str:
        return self.entry.topic

    @property
    def body(self) -> bytes:
        return self.entry.fields.get(b"body", b"")

    @property
    def key(self) -> str | None:
        return self.entry.text("key") or None

    @property
    def headers(self) -> dict[str, str]:
        text = self.entry.text("headers")
        return dict(json.loads(text)) if text else {}

    @property
    def deliver_at(self) -> datetime:
        """When the message was due."""
        return from_epoch_ms(self.entry.number("deliver_at_ms"))

    @property
    def delivered_at(self) -> datetime:
        """When delayline wrote it to the topic (never before ``deliver_at``)."""
        return from_epoch_ms(self.entry.number("delivered_at_ms"))

    @property
    def attempt(self) -> int:
        """1 for the first delivery, then one more for every retry."""
        return self.entry.number("attempt", 1)

    def _ack_plan(self) -> Plan[None]:
        return consuming.ack(self.entry)

    def _retry_plan(
        self, level: int | None, delay: timedelta | int | None, published: Published
    ) -> Plan[bool]:
        """Reschedule with ``attempt + 1`` as the scheduler ``published``, or dead-letter
        once the policy is used up."""
        if level is not None and delay is not None:
            raise ValidationError("delay", "exclusive", "use only one of level or delay, not both")
        explicit_ms = timing.level_delay_ms(level) if level is not None else None
        if delay is not None:
            explicit_ms = delay_ms_of(delay)
        delay_ms = consuming.retry_delay(self.entry, self.retry_policy, explicit_ms)
        now_ms = timing.now_ms()
        if delay_ms is None:
            plan = consuming.dead_letter(self.entry, self.retry_policy.used_up, now_ms=now_ms)
            return Plan(plan.commands, lambda _: False, plan.action, transaction=True)
        message = consuming.next_attempt(self.entry, delay_ms, now_ms=now_ms, limits=self.limits)
        return consuming.retry(self.entry, message, published)

    def _dead_letter_plan(self, reason: str) -> Plan[None]:
        return consuming.dead_letter(self.entry, reason, now_ms=timing.now_ms())
