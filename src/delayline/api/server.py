"""Serving the API with uvicorn: in a background thread for ``delayline run``."""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from delayline.api.middleware import LOOPBACK_HOSTS
from delayline.defaults import DEFAULT_API_HOST, DEFAULT_API_PORT
from delayline.errors import ConfigurationError


def is_loopback(host: str) -> bool:
    """True if ``host`` (an address or a name to bind) reaches this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ApiOptions:
    """Where and how to serve the API; ``token`` turns on bearer auth.

    ``allowed_hosts`` are the names requests may use (empty: the loopback names,
    and ``host`` itself if it is one address), ``docs`` serves Swagger UI, and
    ``insecure_no_auth`` allows listening beyond loopback with no token.
    """

    host: str = DEFAULT_API_HOST
    port: int = DEFAULT_API_PORT
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    docs: bool = False
    insecure_no_auth: bool = False

    def hosts(self) -> tuple[str, ...]:
        """The Host names the API answers to."""
        if self.allowed_hosts:
            return self.allowed_hosts
        bound = () if self.host in ("0.0.0.0", "::", "") else (self.host,)
        return (*LOOPBACK_HOSTS, *bound)

    def check(self) -> None:
        """Raises ConfigurationError for an API open to the network with no token."""
        if not is_loopback(self.host) and not self.token and not self.insecure_no_auth:
            raise ConfigurationError(
                f"the HTTP API would listen on {self.host} with no token, open to anyone "
                "who can reach it: set DELAYLINE_API_TOKEN (or --api-token), or give "
                "--insecure-no-auth if something in front of it checks every request"
            )


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
