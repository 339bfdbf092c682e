"""Batch jobs over a scheduler's checkpoint, beside or instead of the streaming query.

- :mod:`.drain` — ``delayline drain``: hands a stopped scheduler's pending
  messages to a new checkpoint.
- :mod:`.state_scan` — reads the pending messages out of the checkpoint's state
  (and what the inbound feeds hold past it), or its recurring schedules, for a
  listing; ``ListingServer``
  answers clients' requests on a thread of ``delayline run``.
- :mod:`.checkpoint_files` — a checkpoint's own files (offsets, commits, the
  drain's mark), on any Hadoop file system.
"""
