"""Where a chunk of a Redis write ends: at a count, or before a byte budget."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def chunk_end(
    items: Sequence[T], start: int, *, max_items: int, max_bytes: int, size_of: Callable[[T], int]
) -> int:
    """The index after the last item of the chunk that begins at ``start``.

    A chunk holds at most ``max_items``, and ends before the item that would take
    its ``size_of`` sum past ``max_bytes``; it always holds at least one item.
    """
    end = start + 1
    size = size_of(items[start])
    while end < min(len(items), start + max_items):
        size += size_of(items[end])
        if size > max_bytes:
            break
        end += 1
    return end


def chunks(
    items: Sequence[T], *, max_items: int, max_bytes: int, size_of: Callable[[T], int]
) -> Iterator[Sequence[T]]:
    """``items`` cut into consecutive chunks, each ended as :func:`chunk_end` ends it."""
    start = 0
    while start < len(items):
        end = chunk_end(items, start, max_items=max_items, max_bytes=max_bytes, size_of=size_of)
        yield items[start:end]
        start = end
