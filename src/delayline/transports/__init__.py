"""Where messages are stored and delivered. Redis Streams today; the seam is RedisStreams."""
