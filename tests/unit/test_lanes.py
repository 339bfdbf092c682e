"""Which lane each sink row goes to, and messages of groups nobody created."""

from __future__ import annotations

from delayline.rows import Deliver, Drop, ForecastChange, Reject, Revoke, Run, SinkRow
from delayline.scheduler.pipeline.lanes import refuse_unknown_groups, row_group

ID = "01MCC5RMZ8Z7NX95F0DEET2C6W"


def deliver(topic: str, kind: type[Deliver] | type[Drop] | type[Run] = Deliver) -> SinkRow:
    return kind(topic, ID, b"body", "", "", 1_800_000_000_000, 1)


def test_each_row_goes_to_its_topics_group() -> None:
    assert row_group(deliver("billing/invoices")) == "billing"
    assert row_group(deliver("orders")) == "default"
    assert row_group(ForecastChange("ops/x", 0, 1)) == "ops"
    assert row_group(Revoke(ID, 0, "ops/x")) == "ops"
    assert row_group(Reject([(b"topic", b"billing/x")], "bad")) == "billing"
    assert row_group(Reject([(b"topic", b"BAD GROUP/x")], "bad")) == "default"
    assert row_group(Reject([], "no topic")) == "default"


def test_messages_of_unknown_groups_become_rejects_in_their_lane() -> None:
    asked: list[bool] = []

    def known(fresh: bool) -> frozenset[str]:
        asked.append(fresh)
        return frozenset({"billing"})

    rows = [
        deliver("billing/a"),
        deliver("ghost/a", Run),
        deliver("ghost/b"),
        deliver("ghost/c", Drop),
        deliver("plain"),
    ]
    out = refuse_unknown_groups(rows, known)
    assert [out[0], out[3], out[4]] == [rows[0], rows[3], rows[4]]
    for refused in out[1:3]:
        assert isinstance(refused, Reject)
        assert refused.message_id == ID
        assert "no group 'ghost'" in refused.reason
        assert row_group(refused) == "ghost"  # the lane the message would have had
    assert asked == [False, True]  # asked afresh once, not once per row
