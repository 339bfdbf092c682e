"""delayline: delayed messages for any broker, scheduled on Spark Structured Streaming.

>>> from datetime import timedelta
>>> from delayline import Client
>>> client = Client("redis://127.0.0.1:6390/0")
>>> message_id = client.send("orders.timeout", b"order-42", delay=timedelta(minutes=30))
>>> client.cancel(message_id)
True
"""

from delayline.__about__ import __version__
from delayline.async_client import AsyncClient, AsyncDelivery
from delayline.client import Client, Delivery
from delayline.errors import (
    ClusterError,
    ConfigurationError,
    ConnectError,
    DecodeError,
    DelaylineError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidMessageIdError,
    JavaNotFoundError,
    MessageStateError,
    QuotaError,
    ScheduleNotFoundError,
    SchedulerError,
    TransportError,
    ValidationError,
)
from delayline.forecast import Forecast
from delayline.groups import Group, Quotas
from delayline.model import Cancel, Message
from delayline.plans.observing import Metrics
from delayline.retry import RetryPolicy
from delayline.schedules.listed import ListedSchedule
from delayline.schedules.spec import Schedule
from delayline.status import MessageStatus
from delayline.timing import LEVELS_MS
from delayline.validation import Limits

__all__ = [
    "LEVELS_MS",
    "AsyncClient",
    "AsyncDelivery",
    "Cancel",
    "Client",
    "ClusterError",
    "ConfigurationError",
    "ConnectError",
    "DecodeError",
    "DelaylineError",
    "Delivery",
    "Forecast",
    "Group",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidMessageIdError",
    "JavaNotFoundError",
    "Limits",
    "ListedSchedule",
    "Message",
    "MessageStateError",
    "MessageStatus",
    "Metrics",
    "QuotaError",
    "Quotas",
    "RetryPolicy",
    "Schedule",
    "ScheduleNotFoundError",
    "SchedulerError",
    "TransportError",
    "ValidationError",
    "__version__",
]
