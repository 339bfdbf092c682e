"""The systems under test, by name, imported only when asked for (peers need their packages)."""

from __future__ import annotations

import importlib

from bench.systems.base import SystemFactory

#: name -> "module:class"
SYSTEMS = {
    "delayline": "bench.systems.delayline_sys:DelaylineSystem",
    "zset": "bench.systems.zset:ZsetSystem",
    "celery": "bench.systems.celery_sys:CelerySystem",
    "dramatiq": "bench.systems.dramatiq_sys:DramatiqSystem",
    "arq": "bench.systems.arq_sys:ArqSystem",
    "rq": "bench.systems.rq_sys:RqSystem",
    "delayline-kafka": "bench.systems.kafka_sys:DelaylineKafkaSystem",
    "delayline-kafka-eos": "bench.systems.kafka_sys:DelaylineKafkaEosSystem",
    "delayline-kafka-typo": "bench.systems.kafka_sys:DelaylineKafkaTypoSystem",
    "delayline-kafka-in": "bench.systems.kafka_sys:DelaylineKafkaInSystem",
    "kafka-pause": "bench.systems.kafka_sys:KafkaPauseSystem",
}

#: Delivery to Kafka, and the Kafka-native alternative: run only when named in
#: --systems (they start a broker each), on steady, burst and capacity.
KAFKA = (
    "delayline-kafka",
    "delayline-kafka-eos",
    "delayline-kafka-typo",
    "delayline-kafka-in",
    "kafka-pause",
)
#: What ``python -m bench run`` runs without --systems.
DEFAULT_SYSTEMS = tuple(name for name in SYSTEMS if name not in KAFKA)

#: The job-queue peers: they run the steady and burst workloads only.
PEERS = ("celery", "dramatiq", "arq", "rq")

#: What each system's own producer API sustains on this 2-core machine while the
#: system runs (msg/s, rounded down from the 2026-11 runs). A burst's due second
#: is set far enough out for this rate; the plan's time estimate uses it too.
PRODUCER_RATE = {
    "delayline": 7_500,
    "zset": 50_000,
    "celery": 1_000,
    "dramatiq": 2_000,
    "arq": 1_500,
    "rq": 2_000,
    "delayline-kafka": 7_500,
    "delayline-kafka-eos": 7_500,
    "delayline-kafka-typo": 7_500,
    "delayline-kafka-in": 7_500,
    "kafka-pause": 20_000,
}


def load(name: str) -> SystemFactory:
    """The constructor of system ``name``. Raises KeyError for an unknown name."""
    module, _, cls = SYSTEMS[name].partition(":")
    factory: SystemFactory = getattr(importlib.import_module(module), cls)
    return factory
