"""The producer SDK: ``Client.send`` and ``Client.cancel``.

A send validates the message here, fails fast with a ValidationError, and
appends one record to the inbound stream; the scheduler takes it from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import TracebackType

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.transports.redis_streams import DEFAULT_REDIS_URL, RedisStreams
from delayline.validation import Limits


class Client:
    """A producer connected to the Redis that a delayline scheduler reads.

    ``Client()`` connects to the embedded default, ``redis://127.0.0.1:6390/0``.
    ``limits`` should match the scheduler's, so that what the client accepts the
    scheduler accepts too (a record it refuses lands in ``delayline:rejects``).
    """

    def __init__(self, url: str = DEFAULT_REDIS_URL, *, limits: Limits | None = None) -> None:
        self._streams = RedisStreams.from_url(url)
        self._limits = limits or Limits()

    def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Schedule ``body`` for ``topic`` and return the message id.

        Give at most one of ``delay`` (timedelta or ms), ``deliver_at`` (aware
        datetime or epoch ms) or ``level`` (RocketMQ level 1..18); none means
        now. Raises ValidationError for bad input and TransportError if Redis
        fails; nothing is written when it raises ValidationError.
        """
        message = Message.create(
            topic,
            body,
            now_ms=timing.now_ms(),
            limits=self._limits,
            delay=delay,
            deliver_at=deliver_at,
            level=level,
            key=key,
            headers=headers,
        )
        self._streams.append_inbound([message.to_record()])
        return message.id

    def cancel(self, message_id: str) -> bool:
        """Record a cancel for ``message_id``; returns True once it is recorded.

        A cancel that reaches the scheduler before the message is due wins: the
        message is never delivered, even if the cancel arrived first. Raises
        InvalidMessageIdError for a malformed id and TransportError if Redis fails.
        """
        ids.deliver_at_ms_of(message_id)  # validates; the scheduler routes by this time
        self._streams.append_inbound([Cancel(message_id, timing.now_ms()).to_record()])
        return True

    def close(self) -> None:
        """Release the connection pool."""
        self._streams.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
