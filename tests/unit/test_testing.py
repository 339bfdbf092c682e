"""delayline.testing: the polling and port helpers that the tests and the benchmarks share."""

from __future__ import annotations

import socket

import pytest

from delayline.testing import free_port, wait_for


def test_wait_for_returns_the_first_truthy_value() -> None:
    values: list[object] = [0, None, "", [], "ready", "later"]
    answers = iter(values)
    assert wait_for(lambda: next(answers), 5, "an answer", interval_s=0.001) == "ready"
    assert next(answers) == "later", "it kept polling after the condition held"


def test_wait_for_names_what_it_waited_for_after_the_timeout() -> None:
    calls: list[None] = []

    def never() -> bool:
        calls.append(None)
        return False

    with pytest.raises(
        AssertionError, match=r"^timed out after 0\.05 s waiting for the moon\nstill dark$"
    ):
        wait_for(never, 0.05, "the moon", interval_s=0.01, details=lambda: "still dark")
    assert len(calls) >= 2, "it gave up without polling again"


def test_an_exception_from_the_condition_propagates() -> None:
    def dead() -> bool:
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="the process exited"):
        wait_for(dead, 5, "a dead process")


def test_free_port_can_be_bound() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
