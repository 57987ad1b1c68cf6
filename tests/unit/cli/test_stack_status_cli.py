"""`cdclake stack status` shows, for a running service that does not answer, what its probe saw."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from cdclake.cli import stack as stack_cli
from cdclake.stack.manager import ServiceStatus


def _row(name: str, *, running: bool, ready: bool, probe: str = "") -> ServiceStatus:
    return ServiceStatus(name, running, 41 if running else None, ready, 2**20, 2**20, f"{name} here", "x.log", probe)


def test_a_running_service_that_does_not_answer_is_shown_with_its_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(stack_cli, "console", Console(file=out, width=240, color_system=None))
    rows = [
        _row("kafka", running=True, ready=True),
        _row("connect", running=True, ready=False, probe="ReadTimeout: [read timed out] after 5 s"),
        _row("postgres", running=False, ready=False),
    ]
    stack_cli._print_status(SimpleNamespace(status=lambda: rows))  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    connect = next(i for i, line in enumerate(lines) if line.startswith("│ connect "))
    assert "running" in lines[connect] and "ReadTimeout: [read timed out] after 5 s" in lines[connect + 1]
    assert any("kafka" in line and "ready" in line for line in lines)
    assert any("postgres" in line and "stopped" in line for line in lines)
