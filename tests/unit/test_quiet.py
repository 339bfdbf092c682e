"""A local driver's heap is collected once after each load."""

from __future__ import annotations

from delayline.scheduler.runtime.quiet import LOAD_BATCH_ROWS, QuietSpells

LOAD = LOAD_BATCH_ROWS
TRICKLE = LOAD_BATCH_ROWS - 1


def test_nothing_before_the_first_batch_then_once_after_it() -> None:
    spells = QuietSpells(after_s=5.0)
    assert not spells.collect_now(1_000.0)  # still starting: the first batch is not done

    spells.batch_completed(100.0, TRICKLE)  # the first batch ends the start, whatever its size

    assert not spells.collect_now(104.9)
    assert spells.collect_now(105.0)
    assert not spells.collect_now(106.0)
    assert not spells.collect_now(500.0)


def test_a_load_batch_starts_a_new_spell() -> None:
    spells = QuietSpells(after_s=5.0)
    spells.batch_completed(0.0, TRICKLE)
    assert spells.collect_now(6.0)

    spells.batch_completed(30.0, LOAD)

    assert not spells.collect_now(34.0)
    assert spells.collect_now(35.0)


def test_load_batches_keep_putting_it_off() -> None:
    spells = QuietSpells(after_s=5.0)
    for at_s in range(0, 200, 4):
        spells.batch_completed(float(at_s), LOAD)
        assert not spells.collect_now(at_s + 4.9)


def test_a_trickle_does_not_put_it_off_nor_start_a_spell() -> None:
    spells = QuietSpells(after_s=5.0)
    spells.batch_completed(3.0, LOAD)
    for at_s in (4.0, 6.0, 7.5):
        spells.batch_completed(at_s, TRICKLE)
    assert spells.collect_now(8.0)
    spells.batch_completed(20.0, TRICKLE)
    assert not spells.collect_now(40.0)
