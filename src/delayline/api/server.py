"""Serving the API with uvicorn: in a background thread for ``delayline run``."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from delayline.defaults import DEFAULT_API_HOST, DEFAULT_API_PORT
from delayline.errors import ConfigurationError


@dataclass(frozen=True)
class ApiOptions:
    """Where and how to serve the API; ``token`` turns on bearer auth."""

    host: str = DEFAULT_API_HOST
    port: int = DEFAULT_API_PORT
    token: str | None = None


class ApiServer:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        )
        self._thread = threading.Thread(target=self._server.run, name="api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> None:
        """Start serving. Raises ConfigurationError if it cannot (the port is taken, say)."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigurationError(
                    f"cannot serve the HTTP API on {self.host}:{self.port} "
                    "(is the port in use? choose another with --api-port)"
                )
            time.sleep(0.02)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish in-flight requests and stop."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
