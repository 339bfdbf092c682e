"""Which group's delivery lane each sink row goes to, and the rows of groups that do
not exist (pure).

A row's group is its topic's (:func:`delayline.groups.group_of`); each group's
lane has its own outbox and pump (redis/keys.py's ShardKeys.lane). A message of
a group nobody created would wait in a lane that no pump reads: it is rejected
instead, in that lane, with a reason that says so. It stays in its lane whatever
it becomes, so that a replayed batch splits its rows among the lanes the same
way, which each lane's marker needs (see chunks.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from delayline import groups
from delayline.rows import Drop, ForecastChange, OutgoingMessage, Reject, Revoke, SinkRow
from delayline.validation import MAX_TOPIC_CHARS


def row_group(row: SinkRow) -> str:
    """The group whose lane ``row`` is written to: its topic's (a reject's, if the
    record had a topic that could be one; else the default group's)."""
    if isinstance(row, Reject):
        topic = dict(row.fields).get(b"topic", b"")
        if not 0 < len(topic) <= MAX_TOPIC_CHARS:
            return groups.DEFAULT_GROUP
        group = groups.group_of(topic.decode(errors="replace"))
        try:
            return groups.validate_group(group)
        except ValueError:
            return groups.DEFAULT_GROUP
    if isinstance(row, ForecastChange | Revoke | OutgoingMessage):
        return groups.group_of(row.topic)
    return groups.DEFAULT_GROUP


def refuse_unknown_groups(
    rows: Sequence[SinkRow], known: Callable[[bool], frozenset[str]]
) -> list[SinkRow]:
    """``rows`` with each message to deliver (or cascade) of a group that ``known`` does
    not list turned into a reject. ``known(fresh)`` gives the groups besides the
    default one; it is asked once more with ``fresh`` set before a group it did not
    list is refused (the group may be a second old)."""
    listed = known(False)
    fresh = False
    out: list[SinkRow] = []
    for row in rows:
        # A drop only counts: it may go to any lane.
        if not isinstance(row, OutgoingMessage) or isinstance(row, Drop):
            out.append(row)
            continue
        group = groups.group_of(row.topic)
        if group != groups.DEFAULT_GROUP and group not in listed and not fresh:
            listed, fresh = known(True), True
        if group == groups.DEFAULT_GROUP or group in listed:
            out.append(row)
        else:
            out.append(_unknown(row, group))
    return out


def _unknown(row: OutgoingMessage, group: str) -> Reject:
    fields = [
        (b"id", row.id.encode()),
        (b"topic", row.topic.encode()),
        (b"deliver_at_ms", str(row.deliver_at_ms).encode()),
        (b"body", row.body),
    ]
    if row.key:
        fields.append((b"key", row.key.encode()))
    if row.headers:
        fields.append((b"headers", row.headers.encode()))
    reason = f"no group {group!r}: create it (delayline groups create {group}) and send again"
    fields.append((b"reason", reason.encode()))
    return Reject(fields, reason, row.id)
