"""``/v1/admin/groups``: the Manager's routes, behind the admin token: create a group
(its token shown once), list the groups with their health, one group's health and
history, and change its quotas (see docs/groups.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from delayline import timing
from delayline.api.dependencies import Admin, client_for
from delayline.api.schemas import HistoryOut
from delayline.async_client import AsyncClient
from delayline.groups import MAX_QUOTA, Group, quotas_from
from delayline.history import DEFAULT_MINUTES, MAX_MINUTES

router = APIRouter()

HOUR_MS = 3_600_000


class QuotasIn(BaseModel):
    """A group's quotas, each optional (absent or null: no bound)."""

    model_config = ConfigDict(extra="forbid")

    # Documented here, enforced with delayline's own error names by groups.Quotas.
    max_pending: StrictInt | None = Field(
        default=None, json_schema_extra={"minimum": 1, "maximum": MAX_QUOTA}
    )
    max_send_per_s: StrictInt | None = Field(
        default=None, json_schema_extra={"minimum": 1, "maximum": MAX_QUOTA}
    )
    max_body_bytes: StrictInt | None = Field(
        default=None, json_schema_extra={"minimum": 1, "maximum": MAX_QUOTA}
    )
    topic_patterns: list[StrictStr] | None = Field(
        default=None, description="The group's topics a send may name (shell patterns: a.*)."
    )


class GroupIn(BaseModel):
    """A group to create: its name (1-32 of a-z, 0-9, - and _) and quotas."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr
    quotas: QuotasIn = Field(default_factory=QuotasIn)


class GroupOut(BaseModel):
    """A group, its quotas, and its health: its counters (pending, delivered,
    rejected...), lateness percentiles, deliveries in the last minute, dead letters
    and what is due in the next hour."""

    name: str
    created_at_ms: int
    quotas: dict[str, Any]
    health: dict[str, Any]


class CreatedOut(GroupOut):
    """A new group, with its token: the only time delayline shows it."""

    token: str


class GroupDetailOut(GroupOut):
    """A group, its health, and its history, kept by the server."""

    history: HistoryOut


def _quotas(quotas: QuotasIn) -> dict[str, Any]:
    return {name: value for name, value in quotas.model_dump().items() if value is not None}


async def _health(client: AsyncClient) -> dict[str, Any]:
    metrics, history, forecast, dead = await asyncio.gather(
        client.metrics(),
        client.history(1),
        client.pending(by="hour", end=timing.from_epoch_ms(timing.now_ms() + HOUR_MS)),
        client.dead_letters(1_000),
    )
    current = metrics.to_json()
    return {
        **{name: current[name] for name in ("pending", "delivered", "rejected", "cancels_applied")},
        "lateness_p50_ms": current["lateness_p50_ms"],
        "lateness_p99_ms": current["lateness_p99_ms"],
        "delivered_last_minute": history.to_json()["delivered"],
        "due_next_hour": forecast.total,
        "dead_letters": len(dead),
    }


async def _out(group: Group, client: AsyncClient) -> dict[str, Any]:
    stored = group.stored_dict()
    return {"name": group.name, **stored, "health": await _health(client)}


@router.get("/v1/admin/groups", response_model=list[GroupOut])
async def groups(admin: Admin) -> list[dict[str, Any]]:
    """Every group besides the default one, by name, with its health."""
    found = await admin.groups()
    return list(await asyncio.gather(*(_out(g, client_for(admin, g.name)) for g in found)))


@router.post("/v1/admin/groups", response_model=CreatedOut, status_code=201)
async def create_group(group: GroupIn, admin: Admin) -> dict[str, Any]:
    """Create a group with its quotas and a fresh token, shown here once: delayline
    keeps its SHA-256 only. 409 if the name is taken."""
    created = await admin.create_group(group.name, quotas_from(_quotas(group.quotas)))
    return {**await _out(created.group, client_for(admin, group.name)), "token": created.token}


@router.get("/v1/admin/groups/{name}", response_model=GroupDetailOut)
async def group(
    name: str, admin: Admin, minutes: int = Query(DEFAULT_MINUTES, ge=1, le=MAX_MINUTES)
) -> dict[str, Any]:
    """One group's quotas and health, and its last ``minutes`` of history."""
    found = await admin.get_group(name)
    client = client_for(admin, name)
    out, history = await asyncio.gather(_out(found, client), client.history(minutes))
    return {**out, "history": HistoryOut.of(history)}


@router.put("/v1/admin/groups/{name}/quotas", response_model=GroupOut)
async def set_quotas(name: str, quotas: QuotasIn, admin: Admin) -> dict[str, Any]:
    """Replace the group's quotas; its clients apply them within 10 s."""
    changed = await admin.set_group_quotas(name, quotas_from(_quotas(quotas)))
    return await _out(changed, client_for(admin, name))
