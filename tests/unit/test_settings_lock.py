"""``cdclake.spark.SettingsLock``: a block that changes a session's settings runs alone; the statements of other
threads that read them share the lock and wait for it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from cdclake.spark import SettingsLock


def _started(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_statements_share_it_and_a_block_alone_waits_for_them_to_finish() -> None:
    lock = SettingsLock()
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with lock.shared():
            order.append("other")

    with lock.shared():
        second = _started(other)  # a second sharer does not wait for the first
        second.join(5)
        assert not second.is_alive() and order == ["other"]
    order.clear()

    def statement() -> None:
        with lock.shared():
            inside.set()
            release.wait(30)
            order.append("statement")

    def block() -> None:
        with lock.alone():
            order.append("block")

    first = _started(statement)
    assert inside.wait(30)
    alone = _started(block)
    alone.join(0.5)
    assert alone.is_alive() and order == []  # the block waits for the statement
    release.set()
    first.join(30)
    alone.join(30)
    assert order == ["statement", "block"]


def test_statements_wait_while_a_block_runs_alone_and_its_own_thread_may_enter_again() -> None:
    lock = SettingsLock()
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def block() -> None:
        with lock.alone():
            with lock.alone(), lock.shared():  # its own thread takes it again, either way
                inside.set()
                release.wait(30)
                order.append("block")

    def statement() -> None:
        with lock.shared():
            order.append("statement")

    owner = _started(block)
    assert inside.wait(30)
    waiting = _started(statement)
    waiting.join(0.5)
    assert waiting.is_alive() and order == []
    release.set()
    owner.join(30)
    waiting.join(30)
    assert order == ["block", "statement"]
    with lock.alone():  # free again
        pass


def test_a_thread_that_shares_it_cannot_take_it_alone() -> None:
    lock = SettingsLock()
    with lock.shared(), pytest.raises(RuntimeError, match="cannot take it alone"), lock.alone():
        pass
    with lock.alone():  # nothing left held
        pass
