"""Every CLI command through click's CliRunner, against a real Redis."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import redis
from click.testing import CliRunner, Result

from delayline.cli import main
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.listing import PendingMessage
from delayline.redis import keys
from delayline.scheduler.settings import run_options
from delayline.testing import free_port, wait_for
from delayline.timing import now_ms
from tests.support.sinking import answer, count_inbound, delivered, sink


def invoke(redis_url: str, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env={"DELAYLINE_REDIS_URL": redis_url})


def sent(raw: redis.Redis) -> dict[bytes, bytes]:
    return raw.xrange(keys.INBOUND)[-1][1]


def test_send_forms(redis_url: str, raw_redis: redis.Redis) -> None:
    before = now_ms()
    result = invoke(
        redis_url,
        "send",
        "orders.timeout",
        "order-42",
        "--delay",
        "30m",
        "--key",
        "42",
        "--header",
        "a=1",
        "--header",
        "b=x=y",
    )
    assert result.exit_code == 0, result.output
    message_id = result.output.strip()
    assert before + 1_800_000 <= deliver_at_ms_of(message_id) <= now_ms() + 1_800_000
    record = sent(raw_redis)
    assert (record[b"body"], record[b"key"], record[b"headers"]) == (
        b"order-42",
        b"42",
        b'{"a":"1","b":"x=y"}',
    )
    at = invoke(redis_url, "send", "t", "x", "--at", "2027-01-01T00:00:00Z")
    assert deliver_at_ms_of(at.output.strip()) == 1_798_761_600_000
    epoch = invoke(redis_url, "send", "t", "x", "--at", "1800000000000")
    assert deliver_at_ms_of(epoch.output.strip()) == 1_800_000_000_000
    level = invoke(redis_url, "send", "t", "x", "--level", "5")
    assert 59_000 < deliver_at_ms_of(level.output.strip()) - now_ms() <= 60_000
    piped = invoke(redis_url, "send", "t", "-", "--delay", "2m", input=b"\x00from stdin")
    assert piped.exit_code == 0
    assert sent(raw_redis)[b"body"] == b"\x00from stdin"
    implicit = invoke(redis_url, "send", "t", "--delay", "2m", input=b"no body argument")
    assert implicit.exit_code == 0
    assert sent(raw_redis)[b"body"] == b"no body argument"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["send", "bad topic", "x"], "error: topic must be 1-249 characters"),
        (["send", "t", "x", "--delay", "soon"], "error: not a duration: 'soon'"),
        (["send", "t", "x", "--delay", "30"], "error: not a duration: '30'"),
        (["send", "t", "x", "--at", "2027-01-01T00:00:00"], "has no timezone offset"),
        (["send", "t", "x", "--at", "whenever"], "--at 'whenever' is not RFC 3339"),
        (["send", "t", "x", "--at", "2026-W50-1T09:00Z"], "(2026-12-01T09:00:00Z) or epoch ms"),
        (["send", "t", "x", "--at", "2h"], "--at '2h' is not RFC 3339"),
        (["send", "t", "x", "--level", "19"], "level must be an integer from 1 to 18"),
        (
            ["send", "t", "x", "--delay", "1s", "--level", "1"],
            "only one of delay, deliver_at or level",
        ),
        (["send", "t", "x", "--header", "novalue"], "--header must be name=value"),
        (["status", "nope"], "not a delayline message id"),
        (["cancel", "nope"], "not a delayline message id"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    redis_url: str, raw_redis: redis.Redis, args: list[str], message: str
) -> None:
    result = invoke(redis_url, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert result.output.startswith("error: ")
    assert result.output.count("\n") == 1
    assert "Traceback" not in result.output
    assert raw_redis.exists(keys.INBOUND) == 0


def test_unreachable_redis_is_exit_1() -> None:
    result = invoke(f"redis://127.0.0.1:{free_port()}/0", "send", "t", "x")
    assert result.exit_code == 1
    assert result.output.startswith("error: cannot send messages: Redis is unreachable")
    assert result.output.count("\n") == 1


def test_cancel_and_status(redis_url: str) -> None:
    message_id = invoke(redis_url, "send", "t", "x", "--delay", "1h").output.strip()
    status = invoke(redis_url, "status", message_id)
    assert status.exit_code == 0
    assert f"id            {message_id}\nstate         pending\n" in status.output
    cancelled = invoke(redis_url, "cancel", message_id)
    assert (cancelled.exit_code, cancelled.output) == (0, f"cancelled {message_id}\n")
    as_json = json.loads(invoke(redis_url, "status", message_id, "--json").output)
    assert (as_json["id"], as_json["state"]) == (message_id, "cancelled")

    shipped = invoke(redis_url, "send", "t", "x").output.strip()
    sink(redis_url, delivered(shipped, body=b"hello"))
    shown = invoke(redis_url, "status", shipped)
    assert "state         delivered\n" in shown.output
    assert "(late " in shown.output
    too_late = invoke(redis_url, "cancel", shipped)
    assert too_late.exit_code == 1
    assert too_late.output == f"error: cannot cancel message {shipped}: it is delivered\n"


def test_tail_with_a_group_reads_and_acks(redis_url: str, raw_redis: redis.Redis) -> None:
    ids = [new_message_id(now_ms()) for _ in range(2)]
    for message_id in ids:
        sink(redis_url, delivered(message_id, topic="watch", body=b"hello"))
    result = invoke(redis_url, "tail", "watch", "--group", "g", "--count", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[4] for line in lines] == ids  # time, "late", ms, "ms", id
    assert all(" late " in line and "attempt 1  hello" in line for line in lines)
    assert raw_redis.xpending("watch", "g")["pending"] == 0


def test_stats(redis_url: str) -> None:
    shipped = invoke(redis_url, "send", "t", "x").output.strip()
    sink(redis_url, delivered(shipped, body=b"hello"))
    text = invoke(redis_url, "stats")
    assert text.exit_code == 0
    assert "delivered                    1\n" in text.output
    assert "lateness          p50 <=" in text.output
    assert "scheduler         never ran" in text.output
    data = json.loads(invoke(redis_url, "stats", "--json").output)
    assert data["delivered"] == 1
    assert data["lateness_p50_ms"] is not None


def test_stats_tell_a_recorded_cancel_from_an_applied_one(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    # Two sends cancelled, neither due yet: the scheduler has recorded both cancels.
    raw_redis.hset(keys.STATS, mapping={"accepted": 3, "cancels": 2})
    lines = invoke(redis_url, "stats").output.splitlines()
    assert "cancels recorded             2" in lines
    assert "cancels applied              0  as each cancelled message's time comes" in lines
    assert "pending                      3  cancelled ones included until then" in lines
    data = json.loads(invoke(redis_url, "stats", "--json").output)
    assert (data["cancels_recorded"], data["cancels_applied"], data["pending"]) == (2, 0, 3)


def test_levels() -> None:
    result = CliRunner().invoke(main, ["levels"])
    lines = result.output.splitlines()
    assert lines[0] == "level  delay   retry"
    assert lines[1].split() == ["1", "1s", "-"]
    assert lines[3].split() == ["3", "10s", "1"]
    assert lines[18].split() == ["18", "2h", "16"]


@pytest.mark.parametrize(
    "command",
    [
        "run", "api", "send", "cancel", "status", "tail", "stats", "levels", "cluster",
        "entrypoint", "kafka-headers", "schedule",
    ],
)  # fmt: skip
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert f"delayline {command}" in result.output


def test_kafka_headers_print_a_send_record_due_when_asked() -> None:
    before_ms = now_ms()
    result = CliRunner().invoke(main, ["kafka-headers", "orders.timeout", "--delay", "30s"])
    assert result.exit_code == 0, result.output
    fields = dict(part.split(":", 1) for part in result.output.strip().split(","))
    assert (fields["v"], fields["op"], fields["topic"]) == ("1", "send", "orders.timeout")
    assert before_ms + 30_000 <= int(fields["deliver_at_ms"]) <= now_ms() + 30_000
    assert deliver_at_ms_of(fields["id"]) == int(fields["deliver_at_ms"])
    refused = CliRunner().invoke(main, ["kafka-headers", "a:b"])
    assert refused.exit_code == 2
    assert "topic: kafka-console-producer cannot carry 'a:b'" in refused.output


def test_the_entry_point_runs_as_a_file() -> None:
    # As spark-submit runs it: its directory first on sys.path, where the
    # subpackage delayline.redis could shadow redis-py.
    path = CliRunner().invoke(main, ["entrypoint"]).output.strip()
    assert Path(path).name == "__main__.py"
    completed = subprocess.run(
        [sys.executable, path, "levels"], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("level  delay")


@pytest.mark.parametrize("command", ["down", "status"])
def test_cluster_commands_without_a_cluster_say_so(command: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["cluster", command, "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "error: no cluster was started from" in result.output
    assert str(tmp_path.name) in result.output


def test_api_command_serves_until_sigterm(redis_url: str) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "delayline",
            "api",
            "--redis-url",
            redis_url,
            "--port",
            str(port),
            "--api-token",
            "t0ken",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def healthz() -> httpx.Response | None:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
        except httpx.TransportError:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            return None

    try:
        health = wait_for(healthz, 30, "delayline api to answer", interval_s=0.1)
        assert health.status_code == 503  # no scheduler behind this Redis
        denied = httpx.post(
            f"http://127.0.0.1:{port}/v1/messages", json={"topic": "t", "body": "x"}
        )
        assert denied.status_code == 401
        allowed = httpx.post(
            f"http://127.0.0.1:{port}/v1/messages",
            json={"topic": "t", "body": "x"},
            headers={"authorization": "Bearer t0ken"},
        )
        assert allowed.status_code == 201
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        if process.stdout:
            process.stdout.close()


def test_run_takes_every_scheduler_setting_and_the_docs_list_it() -> None:
    shown = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
    page = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    rows = {
        line.split("`")[1]: line.split("|")[2].strip().strip("`").replace(",", "")
        for line in page.splitlines()
        if line.startswith("| `--")
    }
    for setting in run_options():
        assert setting.flag in shown
        assert setting.flag in rows, (
            f"docs/cli.md's table of `delayline run` options lacks {setting.flag}"
        )
        if setting.default is not None:
            assert f"[default: {setting.default}]" in shown
            assert rows[setting.flag] == str(setting.default), setting.flag


def test_pending_prints_a_bar_per_bucket_and_the_hot_instants(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    for at, body in (("2026-12-10T10:00:00Z", "x"), ("2026-12-10T10:00:00Z", "y")):
        assert invoke(redis_url, "send", "a", body, "--at", at).exit_code == 0
    assert invoke(redis_url, "send", "b", "z", "--at", "2026-12-10T11:30:00Z").exit_code == 0
    count_inbound(redis_url)
    result = invoke(redis_url, "pending", "--by", "hour", "--hot-over", "1")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("2026-12-10T10:00:00.000Z            2  " + "\u2588" * 40)
    assert lines[0].endswith("a 2")
    assert lines[1].startswith("2026-12-10T11:00:00.000Z            1  " + "\u2588" * 20)
    assert lines[2].split() == ["total", "3"]
    assert lines[4].split() == ["2026-12-10T10:00:00.000Z", "2"]  # the hot instant
    as_json = json.loads(invoke(redis_url, "pending", "--json", "--topic", "b").output)
    assert (as_json["by"], as_json["total"], as_json["topic"]) == ("minute", 1, "b")
    window = invoke(redis_url, "pending", "--from", "2026-12-10T11:00:00Z", "--to", "1800000000000")
    assert window.output.splitlines()[-1].split() == ["total", "1"]
    bad = invoke(redis_url, "pending", "--from", "soon")
    assert bad.exit_code == 2
    assert "--from 'soon' is not RFC 3339 (2026-12-01T09:00:00Z), epoch ms" in bad.output


def test_reschedule_prints_the_new_id(redis_url: str, raw_redis: redis.Redis) -> None:
    old = invoke(redis_url, "send", "t", "x", "--delay", "30s").output.strip()
    result = invoke(redis_url, "reschedule", old, "--at", "2026-12-10T10:00:00Z")
    assert result.exit_code == 0, result.output
    new = result.output.strip()
    assert deliver_at_ms_of(new) == 1_796_896_800_000
    assert f"replaced by   {new}" in invoke(redis_url, "status", old).output
    again = invoke(redis_url, "reschedule", old, "--delay", "1m")
    assert again.exit_code == 1
    assert again.output.strip() == f"error: cannot reschedule message {old}: it is rescheduled"
    assert invoke(redis_url, "reschedule", new, "--delay", "soon").exit_code == 2


def test_send_many_checks_every_line_then_sends_them_with_a_progress_bar(
    redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    lines = [
        '{"topic": "orders", "body": "a", "delay": "30m", "key": "42"}',
        "",
        '{"topic": "orders", "body_b64": "AAE=", "deliver_at": "2026-12-10T10:00:00Z"}',
        '{"topic": "reminders", "body": "c", "level": 3, "headers": {"h": "v"}}',
    ]
    source = tmp_path / "messages.jsonl"
    source.write_text("\n".join(lines) + "\n")
    result = invoke(redis_url, "send-many", str(source), "--progress")
    assert result.exit_code == 0, result.output
    sent = result.stdout.split()
    assert len(sent) == 3
    assert "[" + "#" * 30 + "]  3 / 3" in result.stderr
    records = [fields for _, fields in raw_redis.xrange(keys.INBOUND)]
    assert [r[b"id"].decode() for r in records] == sent[:2]  # the third is near: the outbox
    assert records[1][b"body"] == b"\x00\x01"
    assert deliver_at_ms_of(sent[1]) == 1_796_896_800_000
    assert raw_redis.zscore(keys.OUTBOX, sent[2]) is not None
    piped = invoke(redis_url, "send-many", "-", input=lines[0].encode())
    assert (piped.exit_code, len(piped.stdout.split())) == (0, 1)
    assert piped.stderr == ""  # no bar unless asked, or on a terminal


def test_send_many_sends_nothing_if_any_line_is_bad(
    redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    for bad, why in (
        ('{"topic": "bad topic", "body": "b"}', "line 2: topic"),
        ('{"topic": "t", "body": "b", "delay": "soon"}', "line 2: not a duration"),
        ('{"topic": "t", "body": "b", "when": 1}', "line 2: unknown key 'when'"),
        (
            '{"topic": "t", "body": "b", "deliver_at": "2026-W50-1T09:00Z"}',
            "line 2: deliver_at '2026-W50-1T09:00Z' is not RFC 3339",
        ),
        ("[1, 2]", "line 2: each line must be a JSON object"),
        ("{", "line 2: not JSON"),
    ):
        source = tmp_path / "messages.jsonl"
        source.write_text('{"topic": "t", "body": "a"}\n' + bad + "\n")
        result = invoke(redis_url, "send-many", str(source))
        assert result.exit_code == 2, result.output
        assert why in result.stderr
        assert raw_redis.exists(keys.INBOUND, keys.OUTBOX) == 0


def test_cancel_by_key_and_its_usage_errors(redis_url: str) -> None:
    due_ms = now_ms() + 600_000
    held = PendingMessage(new_message_id(due_ms), "orders", "42", due_ms, 1, 9, "state")
    server = answer(redis_url, [held])
    result = invoke(redis_url, "cancel", "--topic", "orders", "--key", "42")
    server.join(5)
    assert result.output.strip() == "cancelled 1 of topic orders with key 42"
    for args in (["cancel", held.id, "--key", "42"], ["cancel"], ["reschedule", "--topic", "t"]):
        refused = invoke(redis_url, *args)
        assert refused.exit_code == 2
        assert "give either ID, or both --topic and --key" in refused.output
