"""The inbound feeds the source reads, and how its offsets name them.

Each Redis inbound stream is one feed, named in the offset by a field: ``id``
for ``delayline:inbound`` and ``id.<n>`` for inbound shard n's stream; its
offset is a stream entry id (``"<ms>-<seq>"``). With ``--kafka``, each
partition p of the Kafka inbound topic is one more, ``kafka:<topic>:p``, whose
offset is Kafka's. The source, the drain and the state scan read offsets the
same way through this module.
"""

from __future__ import annotations

from delayline.redis import keys

#: The largest sequence number of a stream id: "<ms>-MAX_SEQ" ends millisecond <ms>.
MAX_SEQ = 2**64 - 1
#: The offset of a stream not read yet: every entry comes after it.
START_ID = "0-0"


def id_order(entry_id: str) -> tuple[int, int]:
    """A stream entry id as a sortable (ms, seq) pair."""
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def offset_fields(inbound_shards: int) -> list[tuple[str, str]]:
    """(offset field, stream) of every inbound stream: ``id`` for the default one,
    ``id.<n>`` for shard n's."""
    default, *shards = keys.inbound_streams(inbound_shards)
    return [("id", default), *((f"id.{shard}", stream) for shard, stream in enumerate(shards))]


def kafka_prefix(topic: str) -> str:
    """The offset field of partition p of the Kafka inbound ``topic`` is this and p."""
    return f"kafka:{topic}:"
