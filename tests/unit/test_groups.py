"""Groups, the pure parts: names, qualified topics, quotas, the stored form, tokens."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.errors import DecodeError, ValidationError
from delayline.groups import (
    DEFAULT_GROUP,
    Group,
    Quotas,
    group_of,
    new_token,
    qualify,
    quotas_from,
    token_digest,
    unqualified,
    validate_group,
)
from delayline.validation import validate_topic

names = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,31}", fullmatch=True)
topics = st.from_regex(r"[A-Za-z0-9._:-]{1,100}", fullmatch=True)


@given(names, topics)
def test_a_qualified_topic_names_its_group_and_its_topic(group: str, topic: str) -> None:
    qualified = qualify(group, topic)
    assert group_of(qualified) == group
    if group != DEFAULT_GROUP:
        assert unqualified(qualified) == topic
        assert validate_topic(qualified) == qualified


def test_a_plain_topic_is_the_default_groups() -> None:
    assert group_of("orders.created") == DEFAULT_GROUP
    assert qualify(DEFAULT_GROUP, "orders") == "orders"
    # The default group may address any group's topic, as given.
    assert qualify(DEFAULT_GROUP, "billing/invoices") == "billing/invoices"


def test_a_group_client_cannot_name_another_groups_topic() -> None:
    with pytest.raises(ValidationError) as caught:
        qualify("billing", "ops/alerts")
    assert caught.value.rule == "group"


@pytest.mark.parametrize("name", ["", "Billing", "-x", "a" * 33, "a/b", "a:b", None, 7])
def test_bad_group_names_are_refused(name: object) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_group(name)
    assert caught.value.field == "group"


def test_the_default_groups_topics_are_never_qualified() -> None:
    with pytest.raises(ValidationError, match="plain"):
        validate_topic("default/orders")


def test_a_group_keeps_its_quotas_through_its_stored_form() -> None:
    quotas = Quotas(max_pending=10, max_send_per_s=5, max_body_bytes=100, topic_patterns=("a.*",))
    group = Group("billing", quotas, 1_800_000_000_000)
    assert Group.from_stored("billing", group.stored()) == group
    with pytest.raises(DecodeError):
        Group.from_stored("billing", b"not json")


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"max_pending": 0}, "max_pending"),
        ({"max_send_per_s": -1}, "max_send_per_s"),
        ({"max_body_bytes": True}, "max_body_bytes"),
        ({"max_pending": 1.5}, "max_pending"),
        ({"topic_patterns": "a.*"}, "topic_patterns"),
        ({"topic_patterns": ["has space"]}, "topic_patterns"),
        ({"colour": 1}, "quotas"),
        ([], "quotas"),
    ],
)
def test_bad_quotas_are_refused_naming_the_quota(document: object, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        quotas_from(document)
    assert caught.value.field == field


def test_topic_patterns_allow_what_they_match_and_none_allow_all() -> None:
    quotas = quotas_from({"topic_patterns": ["invoices.*", "audit"]})
    assert quotas.allows_topic("invoices.eu")
    assert quotas.allows_topic("audit")
    assert not quotas.allows_topic("audit.x")
    assert Quotas().allows_topic("anything")


def test_tokens_are_random_and_kept_by_digest() -> None:
    first, second = new_token(), new_token()
    assert first != second
    assert len(first) >= 40
    assert token_digest(first) == token_digest(first) != token_digest(second)
    assert first not in token_digest(first)
