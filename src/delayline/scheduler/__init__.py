"""The scheduler: a Spark Structured Streaming query that holds every pending
message in a timing wheel, and the process that runs it.

Map (an arrow is "imports"):

- :mod:`~delayline.scheduler.settings` — ``SchedulerSettings`` (what ``delayline
  run`` takes as options) and the data directory's lock. Pure: the client CLI
  imports it for ``delayline run --help``.
- :mod:`~delayline.scheduler.pinning` — the settings a checkpoint pins, recorded
  next to it (and read under their current names after a rename).
- :mod:`~delayline.scheduler.background` — a daemon thread that runs until told
  to stop.
- :mod:`~delayline.scheduler.pump` — the fine wheel's hand: moves due messages
  from a shard's outbox to their topics, by Redis's clock. The runtime runs one
  per shard; the drain runs them to empty the outboxes.
- :mod:`~delayline.scheduler.lease_keeper` — the scheduler's lease
  (redis/lease.py) in this process: a standby's wait for it, and its renewal on
  a thread, which says when another scheduler took over. The runtime's service
  and the drain hold it.
- :mod:`~delayline.scheduler.pipeline` — the streaming query itself, source ->
  processor -> sink, and what runs inside its tasks. Imports neither of the two
  below.
- :mod:`~delayline.scheduler.jobs` — batch jobs over a checkpoint: the drain
  (``delayline drain``) and the state scan that lists pending messages.
  -> pipeline, pump.
- :mod:`~delayline.scheduler.runtime` — the process: the Spark session and JVM,
  the runner that starts, watches and stops the query and the pumps, its threads
  (the topic trimmer, the listing server's), the worker daemon and the
  standalone cluster. -> pipeline, jobs, pump.

Only :mod:`~delayline.scheduler.pipeline.query` imports the source: the data
flows one way, source -> processor -> sink.
"""
