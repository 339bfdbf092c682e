"""delayline's Redis, the one seam to the network, laid out as the architecture.

``connection`` is the client every caller builds on: it translates redis-py's
errors into delayline's, retries a Redis that cannot serve yet, and runs
commands (``commands``: Redis commands as data, pure) and scripts; the SDK runs
its plans through it. ``inbound`` is the scheduler source's side (it reads and
trims what producers append, and holds the pause gate); ``store`` is the sink,
the outbox and the pump. ``keys`` names the keys delayline owns; ``scripts``
declares each Lua script that makes the writes atomic (its keys, arguments and
reply), and ``lua_source`` loads them from ``lua/`` with the constants and
marker strings that Python and Lua share. ``embedded`` runs a Valkey server of
our own (set up by ``server_setup``), which rewrites its AOF when
``compaction`` (pure) says. This ``__init__`` imports nothing: the pure core
reads key names and script texts here without pulling in redis-py.
"""
