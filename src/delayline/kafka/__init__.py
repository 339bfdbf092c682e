"""Kafka topics as delivery targets: a due message's Kafka record, and the producer
that writes ready messages to their topics."""
