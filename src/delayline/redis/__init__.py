"""delayline's Redis, the one seam to the network, laid out as the architecture.

``connection`` is the client every caller builds on: it translates redis-py's
errors into delayline's and retries a Redis that cannot serve yet; the SDK runs
its plans through it. ``inbound`` is the scheduler source's side (it reads and
trims what producers append, and holds the pause gate); ``store`` is the sink,
the outbox and the pump. ``keys`` names the keys delayline owns, and ``scripts``
loads the Lua that makes the writes atomic from ``lua/``. ``embedded`` runs a
Valkey server of our own, which rewrites its AOF when ``compaction`` (pure)
says. This ``__init__`` imports nothing: the pure core reads key names and
script texts here without pulling in redis-py.
"""
