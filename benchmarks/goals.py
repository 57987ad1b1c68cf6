"""The throughput and latency goals the benchmarks are measured against, and the table of one run's figures beside
them (pure: no Spark, no stack).

``bench_real_shape.py --goals`` gathers the figures: its own cells and peers, then ``bench_latency.py``,
``bench_small_batches.py`` and ``bench_ingest.py --skip-e2e``, each of which writes its headline figures with
``--figures-json``. :func:`render_goals` turns them into the goals table it prints (and ``--write-docs`` puts in
docs/benchmarks.md). A figure the run did not measure says so; a figure measured on a smaller backlog than its
goal's (``--quick``) is not judged.
"""

from __future__ import annotations

from typing import Any

#: The backlog the throughput, peer and memory goals are stated for.
GOAL_EVENTS = 1_000_000
MIN_EVENTS_PER_S = 40_000
MIN_SINK_RATIO = 1.5
MIN_TUTORIAL_RATIO = 3.0
MAX_P50_S, MAX_P99_S = 5.0, 15.0
MAX_SMALL_BATCH_S = 2.0
MAX_MERGE_GROWTH = 1.2
MAX_PEAK_RSS_GIB = 2.0

NOT_RUN = "not run"


def at_least(value: float, goal: float, unit: str = "") -> str:
    """``met`` when ``value`` reaches ``goal``, else by how much it falls short and what share of it it reaches."""
    if value >= goal:
        return "met"
    return f"missed by {_number(goal - value)}{unit} ({value / goal:.0%} of the goal)"


def at_most(value: float, goal: float, unit: str = "", *, strict: bool = False) -> str:
    """``met`` when ``value`` stays within ``goal`` (below it, ``strict``), else by how much it is over."""
    if value < goal or (value == goal and not strict):
        return "met"
    return f"missed by {_number(value - goal)}{unit}" if value > goal else "missed: at the limit, not below it"


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def headline_cell(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cell the goals are stated for: PostgreSQL with schemas on (else the first cell); ``cells``: anything
    with ``kind`` and ``schemas``."""
    return next((c for c in cells if c["kind"] == "postgres" and c["schemas"]), cells[0] if cells else None)


def goal_rows(figures: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(figure, goal, this run, verdict)`` for every goal, from one run's ``figures``:

    * ``events``: the backlog of each real-shape cell; ``cells``: each cell's ``kind``, ``schemas`` (bool),
      ``events_per_s``, ``peak_rss_gib`` and ``lake_equal``;
    * ``peers`` (or None): the headline cell's ``upsert``, ``append``, ``sink`` and ``tutorial`` events/s, and
      ``tutorial_lake`` (its verdict against the backlog);
    * ``latency`` (or None): ``p50_s``, ``p90_s``, ``p99_s``, ``rate``, ``rows`` (the rows measured);
    * ``small_batch`` (or None): ``median_s``, ``warm_batches``, ``records`` (a batch's median);
    * ``merge_growth`` (or None): ``small_rows``, ``large_rows``, ``small_s``, ``large_s`` (the apply phase).
    """
    events, cells = figures["events"], figures.get("cells") or []
    comparable = events >= GOAL_EVENTS
    scale = "" if comparable else f"not judged: {events:,} events (the goal is stated for {GOAL_EVENTS:,})"
    rows: list[tuple[str, str, str, str]] = []
    cell = headline_cell(cells)
    where = f"{cell['kind']}, schemas {'on' if cell['schemas'] else 'off'}" if cell else ""
    rows.append(
        (
            f"real-shape end to end ({where}, transaction metadata, {events:,} events, one process, wall clock)",
            f"≥ {MIN_EVENTS_PER_S:,} events/s",
            f"{cell['events_per_s']:,.0f} events/s" if cell else NOT_RUN,
            (scale or at_least(cell["events_per_s"], MIN_EVENTS_PER_S, " events/s")) if cell else NOT_RUN,
        )
    )
    peers = figures.get("peers")
    if peers:
        sink = peers["append"] / peers["sink"]
        tutorial = peers["upsert"] / peers["tutorial"]
        equal = all(c["lake_equal"] for c in cells)
        rows.append(
            (
                "vs the Iceberg Kafka Connect sink, same topic (cdclake append / sink)",
                f"≥ {MIN_SINK_RATIO}x",
                f"{sink:.2f}x ({peers['append']:,.0f} / {peers['sink']:,.0f} events/s)",
                scale or at_least(sink, MIN_SINK_RATIO, "x"),
            )
        )
        rows.append(
            (
                "vs the tutorial Spark pipeline, same topic (cdclake upsert / tutorial), our lake equal to the source",
                f"≥ {MIN_TUTORIAL_RATIO}x, lake equal",
                f"{tutorial:.2f}x ({peers['upsert']:,.0f} / {peers['tutorial']:,.0f} events/s); our lake equal: "
                f"{'yes' if equal else 'no'}; the tutorial's: {peers['tutorial_lake']}",
                scale or (at_least(tutorial, MIN_TUTORIAL_RATIO, "x") if equal else "missed: our lake differs"),
            )
        )
    else:
        rows.append(("vs the Iceberg Kafka Connect sink", f"≥ {MIN_SINK_RATIO}x", NOT_RUN, NOT_RUN))
        rows.append(("vs the tutorial Spark pipeline", f"≥ {MIN_TUTORIAL_RATIO}x, lake equal", NOT_RUN, NOT_RUN))
    latency = figures.get("latency")
    rows.append(
        (
            f"continuous mode at {latency['rate']:,} events/s: source commit to visible in Iceberg"
            if latency
            else "continuous mode at 1,000 events/s: source commit to visible in Iceberg",
            f"p50 ≤ {MAX_P50_S:.0f} s, p99 ≤ {MAX_P99_S:.0f} s",
            f"p50 {latency['p50_s']:.2f} s, p90 {latency['p90_s']:.2f} s, p99 {latency['p99_s']:.2f} s "
            f"({latency['rows']:,} rows)"
            if latency
            else NOT_RUN,
            _both(
                ("p50", at_most(latency["p50_s"], MAX_P50_S, " s")), ("p99", at_most(latency["p99_s"], MAX_P99_S, " s"))
            )
            if latency
            else NOT_RUN,
        )
    )
    small = figures.get("small_batch")
    rows.append(
        (
            "small batch in a warm driver",
            f"≤ {MAX_SMALL_BATCH_S:.0f} s",
            f"median {small['median_s']:.2f} s ({small['warm_batches']} warm batches of {small['records']} records)"
            if small
            else NOT_RUN,
            at_most(small["median_s"], MAX_SMALL_BATCH_S, " s") if small else NOT_RUN,
        )
    )
    merge = figures.get("merge_growth")
    growth = merge["large_s"] / merge["small_s"] if merge else None
    rows.append(
        (
            "MERGE time growth from {:,} to {:,} rows".format(merge["small_rows"], merge["large_rows"])
            if merge
            else "MERGE time growth from 100K to 10M rows",
            f"< {MAX_MERGE_GROWTH}x",
            f"{growth:.2f}x ({merge['small_s']:.1f} s / {merge['large_s']:.1f} s)" if merge and growth else NOT_RUN,
            at_most(growth, MAX_MERGE_GROWTH, "x", strict=True) if growth is not None else NOT_RUN,
        )
    )
    rss = max((c["peak_rss_gib"] for c in cells), default=None)
    rows.append(
        (
            f"peak RSS at {events:,} events (Python driver + JVM, the most of {len(cells)} cell(s))",
            f"≤ {MAX_PEAK_RSS_GIB:.0f} GiB",
            f"{rss:.2f} GiB" if rss is not None else NOT_RUN,
            (scale or at_most(rss, MAX_PEAK_RSS_GIB, " GiB")) if rss is not None else NOT_RUN,
        )
    )
    return rows


def _both(*verdicts: tuple[str, str]) -> str:
    """``met`` when every labelled verdict is, else the missed ones with their labels."""
    missed = [f"{label} {verdict}" for label, verdict in verdicts if verdict != "met"]
    return "; ".join(missed) or "met"


def render_goals(figures: dict[str, Any]) -> str:
    """The goals table (Markdown) of one run's ``figures`` (:func:`goal_rows`)."""
    lines = ["| figure | goal | this run | verdict |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in goal_rows(figures)]
    return "\n".join(lines)
