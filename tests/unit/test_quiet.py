"""A quiet local driver's heap is collected once per quiet spell."""

from __future__ import annotations

from delayline.scheduler.quiet import QuietSpells


def test_collects_once_after_the_quiet_time() -> None:
    spells = QuietSpells(started_s=100.0, after_s=20.0)

    assert not spells.collect_now(119.9)
    assert spells.collect_now(120.0)
    assert not spells.collect_now(121.0)
    assert not spells.collect_now(500.0)


def test_a_batch_starts_a_new_spell() -> None:
    spells = QuietSpells(started_s=0.0, after_s=20.0)
    assert spells.collect_now(25.0)

    spells.batch_completed(30.0)

    assert not spells.collect_now(45.0)
    assert spells.collect_now(50.0)


def test_batches_keep_putting_it_off() -> None:
    spells = QuietSpells(started_s=0.0, after_s=20.0)
    for at_s in range(0, 200, 10):
        spells.batch_completed(float(at_s))
        assert not spells.collect_now(at_s + 19.0)
