"""Where delayline listens and connects unless told otherwise: each address once."""

from pathlib import Path

#: Port of the embedded Redis: not 6379, to stay clear of a system Redis.
DEFAULT_REDIS_PORT = 6390
#: The Redis that the SDK, the CLI and the scheduler use by default: the embedded one.
DEFAULT_REDIS_URL = f"redis://127.0.0.1:{DEFAULT_REDIS_PORT}/0"
#: Where ``delayline run`` keeps its files, and where the SDK and CLI look for the
#: embedded server's URL (delayline/local.py).
DEFAULT_DATA_DIR = Path("delayline-data")
#: Where ``delayline run`` and ``delayline api`` serve the HTTP API.
DEFAULT_API_HOST = "127.0.0.1"
DEFAULT_API_PORT = 8470
