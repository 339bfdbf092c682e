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
}


def load(name: str) -> SystemFactory:
    """The constructor of system ``name``. Raises KeyError for an unknown name."""
    module, _, cls = SYSTEMS[name].partition(":")
    factory: SystemFactory = getattr(importlib.import_module(module), cls)
    return factory
