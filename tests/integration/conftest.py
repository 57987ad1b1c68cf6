"""Integration fixtures: the real local stack (``cdclake stack up``).

A stack that is already running (``cdclake stack up`` by hand) is reused and left running; otherwise
the session starts it and stops it at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from cdclake.stack import Stack, StackConfig, config


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    # tests/conftest.py points CDC_LAKE_DIR elsewhere; the stack itself lives in the normal state dir.
    local = Stack(StackConfig.from_env())
    already_running = all(svc.process.running() for svc in local.services.values())
    local.up()
    yield local
    if not already_running and not os.environ.get("CDC_KEEP_STACK"):
        local.down()


@pytest.fixture(scope="session")
def connect_url(stack: Stack) -> str:
    return stack.config.connect_url


@pytest.fixture(scope="session")
def connect_auth(stack: Stack) -> tuple[str, str]:
    """The basic-auth credentials of the stack's Kafka Connect REST API."""
    return config.connect_auth(stack.secrets)


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: Stack) -> str:
    return stack.config.kafka_bootstrap
