"""Property-based tests generated from /openapi.json by schemathesis.

Every generated request, valid or not, must get a response that matches the
schema (status code, content type, body), and never a 5xx. Not checked: that
every schema-valid request is accepted. Some rules are beyond JSON Schema
(body size in bytes, one of delay_ms/deliver_at/level, the 2-year horizon),
and those requests are rightly refused with 422.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from delayline.api.app import create_app
from delayline.plans.scheduling import definition_from
from delayline.redis.store import DeliveryStore
from delayline.schedules.listed import ACTIVE, FINISHED, PAUSED, ListedSchedule
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.sinking import answering_every_listing


def test_every_route_keeps_its_contract(redis_url: str) -> None:
    # schemathesis calls the app as Starlette's test client does, by that name.
    app = create_app(redis_url, allowed_hosts=("testserver",))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {
        "POST /v1/messages",
        "POST /v1/messages:batch",
        "GET /v1/messages/{message_id}",
        "DELETE /v1/messages/{message_id}",
        "GET /healthz",
        "GET /metrics",
        "PATCH /v1/messages/{message_id}",
        "GET /v1/pending",
        "GET /v1/pending/messages",
        "DELETE /v1/messages",
        "PATCH /v1/messages",
        "GET /v1/stats",
        "GET /v1/rejects",
        "GET /v1/dead-letters",
        "PUT /v1/schedules/{topic}/{name}",
        "DELETE /v1/schedules/{topic}/{name}",
        "POST /v1/schedules/{topic}/{name}/pause",
        "POST /v1/schedules/{topic}/{name}/resume",
        "GET /v1/schedules",
        "GET /v1/schedules/{topic}/{name}",
        "GET /v1/schedules/{topic}/{name}/next",
    }
    store = DeliveryStore.from_url(redis_url)
    # The listing of schedules answers rows, so that its 200 is checked against the schema.
    with answering_every_listing(redis_url, listed_schedules()):
        check_every_operation(operations, store)


def listed_schedules() -> list[ListedSchedule]:
    """A schedule of each kind of recurrence and each state, as a scan answers them."""
    at_ms = 1_796_115_600_000

    def row(name: str, state: str, next_ms: int | None, last_ms: int | None,
            **definition: Any) -> ListedSchedule:  # fmt: skip
        schedule = definition_from(name, "t", b"\xff", limits=Limits(), **definition)
        return ListedSchedule(schedule, "1-0", state, next_ms, last_ms, 2, 1, now_ms())

    return [
        row("a", ACTIVE, at_ms, None, cron="30 2 * * *", tz="Europe/Paris", catch_up="all"),
        row("b", PAUSED, None, at_ms, every="15m", paused=True),
        row("c", FINISHED, None, at_ms, times=[at_ms], key="k", headers={"h": "v"}),
    ]


def check_every_operation(operations: list[Any], store: DeliveryStore) -> None:
    for operation in operations:
        # A live scheduler, so that /healthz answers 200 (its 503 is tested elsewhere).
        store.record_batches("query", [(1, now_ms(), 300)])

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
        def keeps_contract(case: schemathesis.Case) -> None:
            case.call_and_validate(
                headers=json_if_bodiless(case), excluded_checks=[positive_data_acceptance]
            )

        keeps_contract()


def json_if_bodiless(case: schemathesis.Case) -> dict[str, str] | None:
    """A POST without a body still says it is JSON, as a client must (else 415: see
    tests/integration/test_http_schedules.py), so that the route itself is reached."""
    if case.operation.method.upper() == "POST" and not case.operation.body:
        return {"content-type": "application/json"}
    return None
