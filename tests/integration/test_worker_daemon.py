from __future__ import annotations

import subprocess
import sys

from delayline.scheduler.runtime import worker_daemon


def test_the_daemon_imports_what_workers_use_before_it_serves() -> None:
    # In a fresh interpreter, PySpark's serving loop is replaced by a probe that
    # prints which of the preloaded modules are imported when it would start.
    preloaded = sorted(worker_daemon.PRELOAD["pyspark.worker"])
    probe = (
        "import sys, pyspark.daemon\n"
        f"pyspark.daemon.manager = lambda: print([m for m in {preloaded!r} if m in sys.modules])\n"
        "from delayline.scheduler.runtime import worker_daemon\n"
        "worker_daemon.main(['worker_daemon', 'pyspark.worker'])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert completed.stdout.strip() == str(preloaded)
