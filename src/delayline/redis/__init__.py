"""delayline's Redis, the one seam to the network.

``connection`` translates redis-py's errors into delayline's and retries a Redis
that cannot serve yet; ``keys`` names the keys delayline owns. ``streams`` holds
the inbound side (the scheduler's source reads and trims what producers append)
and the store side (sink writes, the outbox, the pump); ``scripts`` loads the Lua
that makes those writes atomic from ``lua/``. ``embedded`` runs a redis-server of
our own. This ``__init__`` imports nothing: the pure core reads key names and
script texts here without pulling in redis-py.
"""
