"""The scheduler's side of listings: it takes requests, reports progress, writes rows."""

from __future__ import annotations

from collections.abc import Sequence

from delayline.listing import ListRequest, PendingMessage
from delayline.redis import keys
from delayline.redis.connection import MIN_BLOCK_S, RedisConnection
from delayline.schedules.listed import ListedSchedule


class ListRequests(RedisConnection):
    """``delayline:listings`` as the running scheduler serves it."""

    def next_request(self, timeout_s: float) -> tuple[str, ListRequest] | None:
        """The oldest waiting request, or None after ``timeout_s``. A malformed one
        is failed at once and skipped."""
        popped = self._call(
            "wait for a listing",
            lambda: self._node(keys.LISTINGS).brpop([keys.LISTINGS], max(timeout_s, MIN_BLOCK_S)),
        )
        if popped is None:
            return None
        value = popped[1]
        text = value.decode() if isinstance(value, bytes) else value
        listing_id, _, request = text.partition(" ")
        try:
            return listing_id, ListRequest.from_json(request)
        except ValueError as exc:
            self.fail(listing_id, str(exc))
            return None

    def report(self, listing_id: str, state: str, done: int, total: int) -> None:
        """Record how far the listing's scan is (tasks ``done`` of ``total``)."""
        self._call(
            "report a listing's progress",
            lambda: self._node(keys.listing(listing_id)).hset(
                keys.listing(listing_id), mapping={"state": state, "done": done, "total": total}
            ),
        )

    def finish(
        self, listing_id: str, rows: Sequence[PendingMessage] | Sequence[ListedSchedule]
    ) -> None:
        """Write the rows, then mark the listing done, in one transaction."""

        def write() -> None:
            # On a cluster the rows and the listing's hash are in two slots: the rows
            # go first, so a listing is never done without them.
            pipe = self._node(keys.listing(listing_id) + ":rows").pipeline(transaction=True)
            rows_key = keys.listing(listing_id) + ":rows"
            if rows:
                pipe.rpush(rows_key, *(row.dumps() for row in rows))
            pipe.expire(rows_key, keys.LISTING_TTL_S)
            pipe.execute()
            pipe = self._node(keys.listing(listing_id)).pipeline(transaction=True)
            pipe.hset(keys.listing(listing_id), "state", "done")
            pipe.expire(keys.listing(listing_id), keys.LISTING_TTL_S)
            pipe.execute()

        self._call("write a listing", write)

    def fail(self, listing_id: str, error: str) -> None:
        """Mark the listing failed, saying why."""
        self._call(
            "fail a listing",
            lambda: self._node(keys.listing(listing_id)).hset(
                keys.listing(listing_id), mapping={"state": "failed", "error": error}
            ),
        )
