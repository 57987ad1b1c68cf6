"""The Kafka Connect connection form (shared by the hook and the provider info, which must not import the hook)."""

from __future__ import annotations

from typing import Any

DEFAULT_PORT = 8083

KAFKA_CONNECT_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden_fields": [],
    "relabeling": {"schema": "Scheme (http/https)", "login": "User (basic auth)", "password": "Password (basic auth)"},
    "placeholders": {
        "host": "127.0.0.1",
        "port": str(DEFAULT_PORT),
        "schema": "http",
        "extra": '{"timeout": [5, 30], "retries": 3}',
    },
}
