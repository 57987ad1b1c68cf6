"""Integration fixtures: where the local stack's services listen (the ``stack`` fixture is tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdclake.stack import Stack, config
from cdclake.stack.airflow import COMPONENTS


@pytest.fixture(scope="module")
def stack_airflow(stack: Stack) -> Iterator[Stack]:
    """The stack with its Airflow components (API server, scheduler, DAG processor, triggerer) running: those
    this fixture starts are stopped after the module (the session's ``stack`` starts without them)."""
    stopped = [name for name in COMPONENTS if not stack.services[name].process.running()]
    stack.up()
    yield stack
    for name in reversed(stopped):
        stack.services[name].process.stop(timeout_s=60)


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
