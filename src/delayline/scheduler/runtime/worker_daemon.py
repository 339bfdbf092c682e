"""PySpark's Python worker daemon, with the workers' heavy imports done before it forks.

Spark starts ``python -m <this module> <worker module>``, and the daemon forks a
worker per task slot. Each worker would import pyarrow, pandas (pyarrow imports
it at the first array it builds) and the scheduler's modules on its own: about
70 MB of private heap each. Imported here once, those pages are shared
copy-on-write between the daemon and its workers, and ``gc.freeze`` keeps the
collector from touching (and so copying) them.

Only the ``pyspark.worker`` daemon runs our code (the source's reads and the
wheel processor); Spark starts the data source daemons with its own module.
"""

from __future__ import annotations

import gc
import importlib
import sys

#: What a worker of each worker module imports, by module name.
PRELOAD = {
    "pyspark.worker": (
        "pyarrow",
        "pandas",
        "pyspark.worker",
        "delayline.scheduler.pipeline.source",
        "delayline.scheduler.pipeline.processor",
    ),
}


def main(argv: list[str]) -> None:
    """Preload what workers of ``argv[1]`` import, then run PySpark's daemon."""
    for name in PRELOAD.get(argv[1] if len(argv) > 1 else "pyspark.worker", ()):
        importlib.import_module(name)
    gc.freeze()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main(sys.argv)
