"""The streaming query: inbound source -> wheel processor -> delivery sink.

- :mod:`.query` — assembles and starts the query (the only importer of the source).
- :mod:`.source` — the Spark source: plans batches over the inbound feeds (Redis
  streams, Kafka partitions), reads them, trims them once committed.
- :mod:`.feeds` — the feeds' offset fields and stream entry ids (``id_order``).
- :mod:`.records` — an inbound record -> (wheel key, packed record), or a reject.
- :mod:`.handoff` — sorts a read range (:func:`~.handoff.sort_inbound`: near or
  far by :func:`delayline.timing.is_near`) and writes what skips the wheel: near
  sends to the outbox, cancel requests, accepted counts.
- :mod:`.processor` — the timing wheel as a stateful processor.
- :mod:`.schedule_keys` — a recurring schedule's key in the wheel: its ops applied,
  its runs handed over a horizon ahead, what a change revokes.
- :mod:`.sink` — writes what the processor emits to Redis, exactly once.
- :mod:`.chunks` — the resumable, chunked writes that the sink and the hand-off share.
- :mod:`.packs` — the binary format of records between the stages.
- :mod:`.schemas` — every Spark schema (and its Arrow twin).
- :mod:`.task` — which batch and partition a task runs.
- :mod:`.clients` — a Python worker's Redis and Kafka clients, one per URL.
"""
