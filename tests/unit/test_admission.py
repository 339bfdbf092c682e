"""The cap on a batch's inbound records, which follows the batches' time
(delayline/scheduler/pipeline/admission.py)."""

from __future__ import annotations

from delayline.scheduler.pipeline.admission import FIRST_ROWS, LEAST_ROWS, Admission


def test_a_run_starts_below_the_most_and_never_above_it() -> None:
    assert Admission(most_rows=50_000, target_ms=5_000).rows == FIRST_ROWS
    assert Admission(most_rows=500, target_ms=5_000).rows == 500


def test_a_slow_batch_the_cap_bound_scales_the_cap_down_to_the_target() -> None:
    # The first batch's new schedules took 3 s: the next admits what takes 2 s.
    admission = Admission(most_rows=50_000, target_ms=2_000)
    admission.observe(elapsed_ms=3_000, capped=True)
    assert admission.rows == FIRST_ROWS * 2_000 // 3_000


def test_a_fast_batch_the_cap_bound_doubles_the_cap_at_most() -> None:
    admission = Admission(most_rows=50_000, target_ms=5_000)
    admission.observe(elapsed_ms=500, capped=True)
    assert admission.rows == 2 * FIRST_ROWS
    admission.observe(elapsed_ms=4_000, capped=True)
    assert admission.rows == 2 * FIRST_ROWS * 5 // 4
    for _ in range(5):
        admission.observe(elapsed_ms=500, capped=True)
    assert admission.rows == 50_000


def test_a_batch_the_cap_did_not_bind_changes_nothing() -> None:
    # Its time went to timers or a cold start, not to records the cap let in.
    admission = Admission(most_rows=50_000, target_ms=5_000)
    admission.observe(elapsed_ms=60_000, capped=False)
    admission.observe(elapsed_ms=10, capped=False)
    assert admission.rows == FIRST_ROWS


def test_however_slow_the_batches_the_source_reads_on() -> None:
    admission = Admission(most_rows=50_000, target_ms=5_000)
    for _ in range(20):
        admission.observe(elapsed_ms=600_000, capped=True)
    assert admission.rows == LEAST_ROWS
    tiny = Admission(most_rows=100, target_ms=5_000)
    tiny.observe(elapsed_ms=600_000, capped=True)
    assert tiny.rows == 100, "the floor is never above the most"


def test_a_backlog_of_cheap_records_settles_where_a_batch_takes_the_target() -> None:
    # A batch costs 450 ms plus 0.1 ms a record (one-shot sends, bench/notes.md).
    admission = Admission(most_rows=200_000, target_ms=5_000)
    for _ in range(30):
        admission.observe(elapsed_ms=450 + 0.1 * admission.rows, capped=True)
    assert abs(admission.rows - 45_500) < 500
