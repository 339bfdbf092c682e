"""The plans that keep the group registry (see :mod:`delayline.groups`): create a group
with its token, list the groups, change a group's quotas, and find a token's group.

The registry is two hashes in one Redis Cluster slot (keys.GROUPS, keys.GROUP_TOKENS).
A token is kept by its digest only, so the registry cannot give one back: it is
shown once, when the group is made.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from delayline.errors import GroupExistsError, GroupNotFoundError, ValidationError
from delayline.groups import (
    DEFAULT_GROUP,
    MAX_GROUPS,
    Group,
    Quotas,
    token_digest,
    validate_group,
)
from delayline.plans import Plan
from delayline.redis import keys, scripts


def create_group(group: Group, token: str) -> Plan[Group]:
    """Register ``group`` with ``token``. Raises GroupExistsError for a name taken, and
    ValidationError for the default group's name or once the registry holds MAX_GROUPS
    groups."""
    if group.name == DEFAULT_GROUP:
        raise ValidationError("group", "reserved", f"the {DEFAULT_GROUP!r} group exists always")
    args = [group.name, group.stored(), token_digest(token), MAX_GROUPS]
    command = scripts.CREATE_GROUP.command(
        scripts.CREATE_GROUP.keys(groups=keys.GROUPS, tokens=keys.GROUP_TOKENS), args
    )

    def parse(replies: list[Any]) -> Group:
        outcome = int(replies[0])
        if outcome == 0:
            raise GroupExistsError(f"a group named {group.name!r} exists already")
        if outcome < 0:
            raise ValidationError(
                "group", "count", f"delayline keeps at most {MAX_GROUPS} groups besides the default"
            )
        return group

    return Plan([command], parse, "create a group")


def groups() -> Plan[list[Group]]:
    """Every group besides the default one, by name."""

    def parse(replies: list[Any]) -> list[Group]:
        found = {name.decode(): stored for name, stored in replies[0].items()}
        return [Group.from_stored(name, found[name]) for name in sorted(found)]

    return Plan([("HGETALL", keys.GROUPS)], parse, "read the groups")


def group(name: str) -> Plan[Group]:
    """The group named ``name``. Raises ValidationError for a bad name and
    GroupNotFoundError for an unknown one; the default group has no quotas."""
    validate_group(name)
    if name == DEFAULT_GROUP:
        return Plan([], lambda _: Group(DEFAULT_GROUP), "read a group")

    def parse(replies: list[Any]) -> Group:
        if replies[0] is None:
            raise GroupNotFoundError(name)
        return Group.from_stored(name, replies[0])

    return Plan([("HGET", keys.GROUPS, name)], parse, "read a group")


def set_quotas(name: str, quotas: Quotas) -> Plan[Group]:
    """Replace group ``name``'s quotas. Raises GroupNotFoundError for an unknown one."""

    def write(current: Group) -> Plan[Group]:
        changed = replace(current, quotas=quotas)
        return Plan(
            [("HSET", keys.GROUPS, name, changed.stored())], lambda _: changed, "set quotas"
        )

    read = group(name)

    def parse(replies: list[Any]) -> Plan[Group]:
        current = read.parse(replies)
        assert isinstance(current, Group)
        return write(current)

    return Plan(read.commands, parse, read.action)


#: A scheduler that reported this recently (ms) pumps a new group's lane soon.
_ALIVE_MS = 30_000


def lane_waits(name: str, *, now_ms: int) -> Plan[bool]:
    """Whether group ``name``'s lane is still to be pumped by a running scheduler: the
    scheduler records each lane it pumps (keys.GROUP_LANES), within a second of the
    group's creation; with no scheduler reporting, nothing is waited for."""

    def parse(replies: list[Any]) -> bool:
        pumped, updated = replies
        alive = updated is not None and now_ms - int(updated) <= _ALIVE_MS
        return alive and not pumped

    commands = [("HEXISTS", keys.GROUP_LANES, name), ("HGET", keys.HEARTBEAT, keys.BEAT_FIELD)]
    return Plan(commands, parse, "read whether a group's lane is pumped")


def group_of_token(token: str) -> Plan[str | None]:
    """The name of the group whose token ``token`` is, or None."""

    def parse(replies: list[Any]) -> str | None:
        return None if replies[0] is None else bytes(replies[0]).decode()

    return Plan([("HGET", keys.GROUP_TOKENS, token_digest(token))], parse, "check a token")
