"""Integration fixtures: where the local stack's services listen (the ``stack`` fixture is tests/conftest.py's)."""

from __future__ import annotations

import pytest

from cdclake.stack import Stack, config


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
