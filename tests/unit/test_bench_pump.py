"""``python -m bench pump`` still fits the pump's script it takes apart."""

from __future__ import annotations

import pytest
from bench.pump import PUMP_PARTS

from delayline.redis import scripts


@pytest.mark.parametrize(("name", "part"), [(name, part) for name, part, _ in PUMP_PARTS])
def test_each_part_the_breakdown_takes_out_is_in_the_pump_script(name: str, part: str) -> None:
    assert part in scripts.PUMP.text, f"the pump script has no {name!r} part any more"
