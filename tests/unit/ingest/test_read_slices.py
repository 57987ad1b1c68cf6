"""How a topic's Kafka read is cut into offset slices: up to two per core, none below the slice minimum, none above
the maximum."""

from __future__ import annotations

from cdclake.ingest.sources import SLICE_MAX_RECORDS, SLICE_MIN_RECORDS, read_slices


def test_a_small_range_is_read_in_one_slice_and_a_large_one_on_every_core() -> None:
    assert read_slices(0, 2) == 1
    assert read_slices(64, 2) == 1
    assert read_slices(2 * SLICE_MIN_RECORDS - 1, 2) == 1
    assert read_slices(2 * SLICE_MIN_RECORDS, 2) == 2
    assert read_slices(3 * SLICE_MIN_RECORDS, 2) == 3
    assert read_slices(1_000_000, 2) == 4  # two per core, each of the maximum
    assert read_slices(1_000_000, 8) == 16


def test_a_large_range_is_cut_so_that_no_slice_holds_more_than_the_maximum() -> None:
    assert read_slices(4 * SLICE_MAX_RECORDS, 2) == 4
    assert read_slices(4 * SLICE_MAX_RECORDS + 1, 2) == 5
    assert read_slices(3_000_000, 2) == 12  # a task's memory does not grow with the batch
    assert read_slices(3_000_000, 8) == 16
