"""A daemon thread of the scheduler's process that runs until it is told to stop."""

from __future__ import annotations

import threading


class Background:
    """Runs :meth:`_run` on a daemon thread named ``name``; :meth:`_run` returns once
    ``self._stop`` is set (wait on it rather than sleeping, to stay stoppable)."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the thread to stop, and wait up to ``timeout_s`` for it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        raise NotImplementedError
