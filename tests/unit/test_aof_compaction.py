from __future__ import annotations

import pytest

from delayline.redis.compaction import (
    FORCE_GROWTH_FACTOR,
    FORCE_GROWTH_MAX_BYTES,
    FORCE_GROWTH_MIN_BYTES,
    MIN_SIZE_BYTES,
    QUIET_BYTES_PER_S,
    QUIET_FOR_S,
    AofCompaction,
)

MB = 1024 * 1024


def _feed(policy: AofCompaction, samples: list[tuple[float, int]], base: int) -> list[bool]:
    return [policy.observe(at_s, size, base, rewriting=False) for at_s, size in samples]


def test_a_doubled_aof_is_rewritten_once_writes_have_been_quiet_for_a_while() -> None:
    policy = AofCompaction()
    base = 20 * MB
    loud = [(t * 0.5, base * 2 + int(t * 10 * MB)) for t in range(6)]
    assert _feed(policy, loud, base) == [False] * 6
    end = loud[-1][1]
    quiet_at = loud[-1][0]
    quiet = [(quiet_at + 0.5 * n, end + n * 1000) for n in range(1, 6)]
    decisions = _feed(policy, quiet, base)
    first = decisions.index(True)
    assert quiet[first][0] - quiet_at >= QUIET_FOR_S
    assert not any(decisions[:first])


def test_nothing_under_the_floor_or_short_of_doubling_is_rewritten() -> None:
    policy = AofCompaction()
    small = [(float(t), MIN_SIZE_BYTES - MB) for t in range(10)]
    assert not any(_feed(policy, small, base=0))
    policy = AofCompaction()
    undoubled = [(float(t), 2 * 40 * MB - 1) for t in range(10)]
    assert not any(_feed(policy, undoubled, base=40 * MB))


@pytest.mark.parametrize(
    ("base", "allowed_growth"),
    [
        (10 * MB, FORCE_GROWTH_MIN_BYTES),  # a small base: not every few seconds
        (300 * MB, FORCE_GROWTH_FACTOR * 300 * MB),  # proportional to the live data
        (1024 * MB, FORCE_GROWTH_MAX_BYTES),  # a restart's load time stays bounded
    ],
)
def test_a_load_that_never_quiets_forces_the_rewrite_once_the_aof_outgrows_its_base(
    base: int, allowed_growth: int
) -> None:
    policy = AofCompaction()
    step = 20 * MB  # 40 MB/s, sampled twice a second
    samples = [(n * 0.5, 2 * base + n * step) for n in range(400)]
    decisions = _feed(policy, samples, base)
    first = decisions.index(True)
    assert samples[first][1] - base >= allowed_growth
    assert samples[first - 1][1] - base < allowed_growth


def test_no_rewrite_is_started_while_one_runs() -> None:
    policy = AofCompaction()
    base = 20 * MB
    for n in range(10):
        assert not policy.observe(n * 0.5, 3 * base, base, rewriting=True)
    assert policy.observe(5.0, 3 * base, base, rewriting=False)


def test_a_trickle_under_the_quiet_rate_counts_as_quiet() -> None:
    policy = AofCompaction()
    base = 20 * MB
    trickle = int(QUIET_BYTES_PER_S * 0.5) - 1  # per half second
    samples = [(n * 0.5, 2 * base + n * trickle) for n in range(8)]
    assert any(_feed(policy, samples, base))
