"""Server URLs as people may see them (pure): the password never printed or logged."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: What a redacted secret reads as.
MASK = "***"

#: Query parameters that redis-py takes as a secret.
_SECRET_PARAMETERS = frozenset({"password"})


def redacted(url: str) -> str:
    """``url`` with its password (in the user info, or a ``password`` parameter) as
    ``***``, and everything else as given; a URL that does not parse is masked whole
    after its scheme, since it may hold a secret in a place we cannot tell."""
    try:
        parts = urlsplit(url)
        has_password = parts.password is not None
    except ValueError:
        scheme, separator, _ = url.partition("://")
        return f"{scheme}://{MASK}" if separator else MASK
    netloc = parts.netloc
    if has_password:
        user_info, _, host = netloc.rpartition("@")
        user = user_info.partition(":")[0]
        netloc = f"{user}:{MASK}@{host}"
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(name in _SECRET_PARAMETERS for name, _ in pairs):
        query = urlencode(
            [(name, MASK if name in _SECRET_PARAMETERS else value) for name, value in pairs],
            safe="*",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
