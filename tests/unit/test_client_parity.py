"""The sync and async SDKs are twins: the same methods, taking the same arguments."""

from __future__ import annotations

import inspect

import pytest

from delayline import AsyncClient, AsyncDelivery, Client, Delivery

#: Methods that do no I/O, and so are plain functions on both.
NO_IO = frozenset({"for_group"})


def public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if name[0] != "_"}


def parameters(function: object) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sync", "twin"), [(Client, AsyncClient), (Delivery, AsyncDelivery)], ids=["client", "delivery"]
)
def test_the_async_twin_has_every_method_with_the_same_parameters(sync: type, twin: type) -> None:
    assert public_methods(sync) == public_methods(twin)
    for name in public_methods(sync):
        method, counterpart = getattr(sync, name), getattr(twin, name)
        asynchronous = inspect.iscoroutinefunction(counterpart) or inspect.isasyncgenfunction(
            counterpart
        )
        assert asynchronous != (name in NO_IO), f"{twin.__name__}.{name}: async or not?"
        assert inspect.isasyncgenfunction(counterpart) == inspect.isgeneratorfunction(method), name
        assert parameters(method) == parameters(counterpart), name


def test_both_clients_close_at_the_end_of_a_with_block() -> None:
    assert parameters(Client.__exit__) == parameters(AsyncClient.__aexit__)
    assert inspect.iscoroutinefunction(AsyncClient.__aenter__)
