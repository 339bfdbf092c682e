"""The scheduler's process: what starts, runs and stops the streaming query.

- :mod:`.runner` — ``Scheduler``: the pumps, then Spark and the query; the
  heartbeat; stopping between batches.
- :mod:`.rehearsal` — a standby's warm-up: Spark, its workers, and a query of the
  same shape on a scratch checkpoint, reading and writing nothing of Redis.
- :mod:`.session` — the Spark session (RocksDB state, quiet logs, our Python);
  ``log4j2.properties`` beside it.
- :mod:`.java` — finds a Java 17+ for the JVM.
- :mod:`.priority` — how much nicer Spark runs than delayline's own threads.
- :mod:`.worker_daemon` — PySpark's worker daemon, with heavy imports done once.
- :mod:`.quiet` — quiet spells: when a local driver may trim its heap (pure).
- :mod:`.standalone` — ``delayline cluster``: a Spark standalone cluster.
- :mod:`.trimmer` — trims topic streams by their retention (a
  :mod:`~delayline.scheduler.background` thread, as the pumps are).
"""
