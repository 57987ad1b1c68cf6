"""Fixtures of the Kafka Connect client tests: a client on a fake URL that records its back-off sleeps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock as rm
from connect_helpers import URL

from cdclake.connect import KafkaConnectClient


@pytest.fixture
def sleeps() -> list[float]:
    """The back-off sleeps the client asked for (never slept)."""
    return []


@pytest.fixture
def client(sleeps: list[float]) -> Iterator[KafkaConnectClient]:
    c = KafkaConnectClient(URL, retries=3, backoff_base_s=0.5, backoff_max_s=2.0, sleep=sleeps.append)
    yield c
    c.close()


@pytest.fixture
def rest_mock() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m
