"""Kafka in and out: the records' layouts, the SDK's producer to the inbound topic,
the scheduler source's reads of it, the producer of due messages to their topics,
and the consumer's retry."""
