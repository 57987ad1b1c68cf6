"""The Docker-free local stack: Kafka (KRaft), Kafka Connect + Debezium, PostgreSQL and MariaDB on loopback.

``cdclake stack up | down | status | logs | env`` drives it; :class:`~cdclake.stack.manager.Stack` is the API.
"""

from __future__ import annotations

from cdclake.stack.config import StackConfig
from cdclake.stack.manager import Stack

__all__ = ["Stack", "StackConfig"]
