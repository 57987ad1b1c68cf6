"""How a topic's Kafka read is cut into offset slices: up to two per core, none below the slice minimum."""

from __future__ import annotations

from cdclake.ingest.sources import SLICE_MIN_RECORDS, read_slices


def test_a_small_range_is_read_in_one_slice_and_a_large_one_on_every_core() -> None:
    assert read_slices(0, 2) == 1
    assert read_slices(64, 2) == 1
    assert read_slices(2 * SLICE_MIN_RECORDS - 1, 2) == 1
    assert read_slices(2 * SLICE_MIN_RECORDS, 2) == 2
    assert read_slices(3 * SLICE_MIN_RECORDS, 2) == 3
    assert read_slices(1_000_000, 2) == 4  # two per core at most
    assert read_slices(1_000_000, 8) == 16
