"""Which Redis a client means when it names none: the one ``delayline run`` embeds.

``delayline run`` gives its embedded server a generated password and leaves
the server's URL, password included, in ``<data dir>/redis/url`` (mode 0600).
The SDK and the CLI read it from there when they run on the same machine,
so that nobody types or sees the password. This module owns that file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from delayline.defaults import DEFAULT_DATA_DIR, DEFAULT_REDIS_URL

#: Environment variables a client reads when it is given no URL.
URL_ENV = "DELAYLINE_REDIS_URL"
DATA_DIR_ENV = "DELAYLINE_DATA_DIR"
#: The embedded server's directory inside the data directory, and its URL file there.
SERVER_DIR_NAME = "redis"
URL_FILE_NAME = "url"


def server_dir(data_dir: Path) -> Path:
    """The directory of the embedded server of ``data_dir``: its AOF, log and URL."""
    return Path(data_dir) / SERVER_DIR_NAME


def read_url(directory: Path) -> str | None:
    """The URL the embedded server of ``directory`` (a :func:`server_dir`) left, or None
    if it left none or it cannot be read."""
    try:
        text = (Path(directory) / URL_FILE_NAME).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def password(directory: Path) -> str:
    """The embedded server's password: the one it had before, so that clients and
    URLs keep working across restarts, or a new random one (43 URL-safe characters)."""
    previous = read_url(directory)
    with contextlib.suppress(ValueError):  # a damaged file: a new password
        if previous is not None and (kept := urlsplit(previous).password):
            return kept
    return secrets.token_urlsafe(32)


def write_url(directory: Path, url: str) -> None:
    """Leave ``url`` in ``directory`` for clients, readable by this user only.

    Written to a private temporary file and renamed over the old one, so that a
    reader sees the old URL or the new one, and never a part or a wider mode.
    """
    target = Path(directory) / URL_FILE_NAME
    temporary = target.with_name(f".{URL_FILE_NAME}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(url + "\n")
    os.replace(temporary, target)


def redis_url(url: str | None = None) -> str:
    """The Redis URL a client uses: ``url`` if given; else ``$DELAYLINE_REDIS_URL``; else
    the URL that ``delayline run`` left in ``$DELAYLINE_DATA_DIR`` (default
    ``./delayline-data``); else the embedded server's default address, without a
    password."""
    if url:
        return url
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV]
    data_dir = Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)
    return read_url(server_dir(data_dir)) or DEFAULT_REDIS_URL
