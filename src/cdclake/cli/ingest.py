"""``cdclake ingest`` and ``cdclake replay``: run the ingestion job locally (the same code spark-submit runs).

Exit status: 0 when every batch committed without dead letters (or nothing was new); :data:`EXIT_DEAD_LETTERS`
(65) when a batch committed but dead-lettered records, unless ``--allow-dead-letters``; 75 when another run
held the source's lock (:data:`cdclake.cli.main.EXIT_SOURCE_BUSY`); 1 on an error, among them
:class:`~cdclake.exceptions.OffsetGapError` (Kafka no longer holds offsets the source continues from; ``ingest
--accept-gap TOPIC[:PARTITION]`` accepts the loss).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from cdclake.ingest.follow import COMPACT_EVERY_DEFAULT, KEEP_SNAPSHOTS_DEFAULT
from cdclake.ingest.lock import DEFAULT_WAIT_S
from cdclake.ingest.offsets import GapAcceptance
from cdclake.ingest.summary import describe_dead_letters
from cdclake.lake import LakeConfig
from cdclake.lake.audit import DEAD_LETTERS

if TYPE_CHECKING:
    from cdclake.ingest.follow import FollowOptions
    from cdclake.ingest.summary import BatchSummary

console = Console(stderr=True)
SchemaSourceOption = typer.Option(
    None,
    "--schema-source",
    help="Where column types come from when the records carry no schema: database (the source's catalog, "
    "through the spec's reader connection), lake (the existing Iceberg tables) or a JSON schema file "
    "[default: the spec's converters.schema_source; without a spec, lake or a file is required].",
)
LockWait = typer.Option(
    DEFAULT_WAIT_S, "--lock-wait", help="Seconds to wait while another run of the source holds its lock."
)
#: Exit status when a batch dead-lettered records (EX_DATAERR); the batch is committed all the same.
EXIT_DEAD_LETTERS = 65
AllowDeadLetters = typer.Option(
    False,
    "--allow-dead-letters",
    help="Exit 0 even when a batch dead-lettered records (otherwise the status is 65; the batch commits either way).",
)


def _session(lake: Optional[Path]):  # type: ignore[no-untyped-def]  # noqa: UP045
    from cdclake.spark import build_spark_session

    with console.status("starting Spark…"):
        spark = build_spark_session("cdclake-ingest", lake=LakeConfig.from_env(lake))
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def _report(summary: dict, as_json: bool) -> None:  # type: ignore[type-arg]
    if as_json:
        typer.echo(json.dumps(summary, indent=2, default=str))
        return
    console.print(
        f"batch [bold]{summary['batch_id']}[/] of {summary['source']}: {summary['status']}, "
        f"{summary['records']} records, {summary['dead_lettered']} dead-lettered"
        + (" (redo of an interrupted batch)" if summary.get("redo") else ""),
        highlight=False,
    )
    table = Table("table", "mode", "events", "applied", "skipped (stale)", "schema changes", "quarantined")
    for name, t in summary["tables"].items():
        table.add_row(
            name,
            t["mode"],
            ", ".join(f"{op}={n}" for op, n in sorted(t["events"].items())),
            str(t["applied"]) + (" (already)" if t["already_applied"] else ""),
            str(t["skipped"]),
            "; ".join(t["schema_changes"]) or "-",
            t["quarantined"] or _released(t.get("released")),
        )
    console.print(table)
    console.print("phases: " + ", ".join(f"{k} {v:.1f}s" for k, v in summary["phases_s"].items()), highlight=False)


def _exit_on_dead_letters(batches: list[dict[str, Any]], allow: bool) -> None:
    """After the report: the dead letters per batch, topic and reason, and how to see them; exit with
    :data:`EXIT_DEAD_LETTERS` unless ``allow``.

    Raises:
        typer.Exit: with :data:`EXIT_DEAD_LETTERS` when a batch dead-lettered records and ``allow`` is false.
    """
    dead = [b for b in batches if b.get("dead_lettered")]
    if not dead:
        return
    source = dead[0]["source"]
    ids = ", ".join(str(b["batch_id"]) for b in dead)
    console.print(
        f"[bold yellow]dead letters:[/] {sum(b['dead_lettered'] for b in dead)} record(s) of batch(es) {ids} could "
        f"not be decoded; the batch(es) committed without them and the records are in {DEAD_LETTERS.identifier}.",
        highlight=False,
    )
    for b in dead:
        for line in describe_dead_letters(b.get("dead_letters") or {}) or [f"{b['dead_lettered']} record(s)"]:
            console.print(f"  batch {b['batch_id']}: {line}", highlight=False)
    console.print(
        f"See them with `cdclake lake show {DEAD_LETTERS.identifier}` (the records), `cdclake audit {source}` "
        f"(per batch), or the CDC source view in Airflow (/cdclake/sources/{source}/dead-letters).",
        highlight=False,
    )
    if not allow:
        console.print(f"exit status {EXIT_DEAD_LETTERS} (--allow-dead-letters exits 0)", highlight=False)
        raise typer.Exit(EXIT_DEAD_LETTERS)


def _report_gaps(summary: dict[str, Any]) -> None:
    """The gaps in Kafka's logs the batch accepted (its summary's ``accepted_gaps``), as warnings."""
    for gap in summary.get("accepted_gaps") or ():
        console.print(
            f"[bold yellow]accepted gap[/] (by {gap.get('accepted_by') or 'the interrupted run'}): {gap['detail']}",
            highlight=False,
        )


def _schema_sources(spark, override: Optional[str]):  # type: ignore[no-untyped-def]  # noqa: UP045
    """The run's schema-source factory: ``--schema-source``, else the spec's ``converters.schema_source``."""
    from cdclake.databases.schema_source import schema_source_for
    from cdclake.lake import rows as lake_rows

    def build(spec, topic_prefix: str):  # type: ignore[no-untyped-def]
        return schema_source_for(spec, topic_prefix, override=override, catalog=lake_rows.session_catalog(spark))

    return build


def _released(released: dict | None) -> str:  # type: ignore[type-arg]
    if not released:
        return "-"
    done = "discarded" if released["action"] == "discard" else "applied"
    return f"released ({released['action']}): {released['records']} held record(s) {done}"


def ingest(
    spec: str = typer.Option(..., "--spec", "-s", help="Connector spec name (include/connectors/NAME.yaml) or path."),
    max_records: Optional[int] = typer.Option(  # noqa: UP045
        None,
        help="Cap on the records of this batch (with --follow: of each batch; default 500000, 0 for no cap).",
    ),
    lake: Optional[Path] = typer.Option(None, help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]"),  # noqa: UP045
    bootstrap: Optional[str] = typer.Option(None, help="Kafka bootstrap servers [default: from the spec]"),  # noqa: UP045
    summary_json: Optional[Path] = typer.Option(None, help="Also write the batch summary JSON here."),  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    lock_wait: float = LockWait,
    allow_dead_letters: bool = AllowDeadLetters,
    schema_source: Optional[str] = SchemaSourceOption,  # noqa: UP045
    accept_gap: Optional[list[str]] = typer.Option(  # noqa: UP045
        None,
        "--accept-gap",
        metavar="TOPIC[:PARTITION]",
        help="Accept, for this run, that Kafka lost records of this topic-partition (or of every partition of "
        "TOPIC) before they were ingested, or that the topic was re-created: the batch starts at the log start "
        "and records the gap in its summary (accepted_gaps). Repeatable, or comma-separated.",
    ),
    accepted_by: Optional[str] = typer.Option(  # noqa: UP045
        None,
        "--accepted-by",
        help="Who accepts the gaps, as recorded with them (default: the user running the command).",
    ),
    follow: bool = typer.Option(
        False,
        "--follow",
        help="Keep running: a batch whenever new records arrive, on one warm Spark session, until SIGTERM or "
        "Ctrl-C (the batch in progress finishes first), --run-for or --max-batches.",
    ),
    poll: float = typer.Option(1.0, "--poll", min=0.05, help="With --follow: seconds between looks at Kafka."),
    run_for: Optional[float] = typer.Option(  # noqa: UP045
        None, "--run-for", min=0, help="With --follow: stop after this many seconds (between batches)."
    ),
    max_batches: Optional[int] = typer.Option(  # noqa: UP045
        None, "--max-batches", min=1, help="With --follow: stop after this many batches."
    ),
    keep_snapshots: Optional[int] = typer.Option(  # noqa: UP045
        None,
        "--keep-snapshots",
        min=0,
        show_default=False,
        help="With --follow: snapshots kept of each table written (their time travel reaches back that many "
        "commits); the older ones are expired as the run goes. 0 leaves them to the maintenance. "
        f"[default: {KEEP_SNAPSHOTS_DEFAULT}]",
    ),
    compact_every: Optional[int] = typer.Option(  # noqa: UP045
        None,
        "--compact-every",
        min=0,
        show_default=False,
        help="With --follow: compact the small files of each table written after every this many batches that "
        "changed it (a reader's scans slow down as they pile up), and the lake's audit tables after every 100th "
        "batch. 0 leaves them to the maintenance. "
        f"[default: {COMPACT_EVERY_DEFAULT}]",
    ),
) -> None:
    """Run one batch: the source's Kafka offsets recorded in the lake up to the current end, into Iceberg.

    One run of a source at a time: while another run (Airflow's or a CLI's) holds the source's lock, this one
    waits up to --lock-wait seconds, then exits with status 75 without doing anything.

    Records that cannot be decoded go to lake.cdc_audit.dead_letters and the batch commits the rest; the
    command then exits with status 65 (listing the dead letters per topic and reason) unless
    --allow-dead-letters is given.

    When Kafka no longer holds the offset a topic-partition continues from (records deleted by retention or
    kafka-delete-records before they were ingested; a topic re-created or its log truncated), the run stops
    before reading anything, names each topic-partition and the missing offsets, and exits with status 1.
    Accept the loss explicitly with --accept-gap TOPIC:PARTITION (or TOPIC) for that run only.

    With --follow the command keeps running: one batch after another as records arrive, each exactly like a
    single run's (same ledger, same lock, taken per batch), on one Spark session, one line per batch. It stops
    between batches on SIGTERM or Ctrl-C, after --run-for seconds or --max-batches batches, and prints what
    it did. With --json its output is JSON Lines: each batch's summary (or, when it found nothing new, the
    source's) as the batch ends, then the run's summary (with `stopped_by`).
    """
    from cdclake.ingest.runner import ingest_from_kafka

    accept = GapAcceptance.parse(accept_gap or (), accepted_by)  # before Spark starts: a typo fails at once
    if follow and accept:
        raise typer.BadParameter(
            "accept a gap with one run of `cdclake ingest --accept-gap ...`, then start --follow", param_hint="--follow"
        )
    follow_only = (run_for, max_batches, keep_snapshots, compact_every)
    if not follow and any(value is not None for value in follow_only):
        raise typer.BadParameter(
            "--run-for, --max-batches, --keep-snapshots and --compact-every go with --follow", param_hint="--follow"
        )
    if follow:
        from cdclake.ingest.follow import FollowOptions

        options = FollowOptions.from_flags(
            poll_s=poll,
            run_for_s=run_for,
            max_batches=max_batches,
            max_records=max_records,
            lock_wait_s=lock_wait,
            keep_snapshots=keep_snapshots,
            compact_every=compact_every,
        )
        spark = _session(lake)
        _follow(spark, spec, bootstrap, schema_source, options, summary_json, as_json, allow_dead_letters)
        return
    spark = _session(lake)
    summary = ingest_from_kafka(
        spark,
        spec,
        bootstrap=bootstrap,
        max_records=max_records,
        lock_wait_s=lock_wait,
        schema_source=_schema_sources(spark, schema_source),
        accept_gaps=accept,
    ).as_dict()
    if summary_json:
        summary_json.write_text(json.dumps(summary, indent=2, default=str))
    _report(summary, as_json)
    _report_gaps(summary)
    _exit_on_dead_letters([summary], allow_dead_letters)


def _follow(  # noqa: PLR0913 - the command's options, passed through
    spark,  # type: ignore[no-untyped-def]
    spec: str,
    bootstrap: str | None,
    schema_source: str | None,
    options: FollowOptions,
    summary_json: Path | None,
    as_json: bool,
    allow_dead_letters: bool,
) -> None:
    """``ingest --follow``: batches until stopped, a line per batch, then the run's summary."""
    from cdclake.ingest.follow import StopFlag, batch_line
    from cdclake.ingest.runner import follow_kafka

    batches: list[dict[str, Any]] = []

    def report(batch: BatchSummary) -> None:
        summary = batch.as_dict()
        if summary["batch_id"] is not None:
            batches.append(summary)
        if as_json:  # JSON Lines: a line per batch as it ends
            typer.echo(json.dumps(summary, default=str))
        else:
            console.print(batch_line(summary), highlight=False)

    stop = StopFlag()
    if not as_json:
        console.print(f"following {spec}: SIGTERM or Ctrl-C stops it after the batch in progress", highlight=False)
    with stop.on_signals():
        result = follow_kafka(
            spark,
            spec,
            bootstrap=bootstrap,
            schema_source=_schema_sources(spark, schema_source),
            options=options,
            stop=stop,
            on_batch=report,
        ).as_dict()
    if summary_json:
        summary_json.write_text(json.dumps(result, indent=2, default=str))
    if as_json:
        typer.echo(json.dumps(result, default=str))
    else:
        console.print(
            f"stopped ({result['stopped_by']}): "
            f"{result['committed_batches']} batch(es) committed, {result['records']} records, "
            f"{result['dead_lettered']} dead-lettered in {result['seconds']:.0f} s",
            highlight=False,
        )
    _exit_on_dead_letters(batches, allow_dead_letters)


def replay(
    files: list[Path] = typer.Argument(
        ...,
        help="JSON Lines files (or folders of *.jsonl), one Kafka record per line: `cdclake capture` output, the same "
        "with headers as an object, or `kcat -J` output.",
    ),
    lake: Optional[Path] = typer.Option(None, help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]"),  # noqa: UP045
    spec: Optional[str] = typer.Option(None, help="Connector spec (default: inferred from the records)."),  # noqa: UP045
    topic_prefix: Optional[str] = typer.Option(None, help="Debezium topic.prefix (default: inferred)."),  # noqa: UP045
    max_records: Optional[int] = typer.Option(None, help="Records per batch (default: all in one batch)."),  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print the batch summaries as a JSON list."),
    lock_wait: float = LockWait,
    allow_dead_letters: bool = AllowDeadLetters,
    schema_source: Optional[str] = SchemaSourceOption,  # noqa: UP045
) -> None:
    """Ingest recorded Kafka records exactly as `ingest` would read them from Kafka (idempotent).

    Runs batches until everything in the files is applied; each batch is reported as it commits. Holds the
    source's lock like `ingest` (status 75 when another run keeps it longer than --lock-wait seconds).
    Lines may mix `cdclake capture`'s format, the same with headers as an object ({"name": "value"}) and
    `kcat -J` output. Every line is checked before Spark starts: a line that is none of these (or a record
    that differs from another at the same topic, partition and offset) stops the replay with status 1 and
    an error naming the file and line.
    Exits with status 65 when a batch dead-lettered records (they are committed to lake.cdc_audit.dead_letters
    like in `ingest`), unless --allow-dead-letters is given.
    """
    from cdclake.ingest.runner import replay_files
    from cdclake.ingest.sources import prepare_replay_files

    prepare_replay_files(files)  # every line checked before Spark starts; the replay reuses the pass
    spark = _session(lake)
    batches: list[dict] = []  # type: ignore[type-arg]

    def report(batch: BatchSummary) -> None:
        batches.append(batch.as_dict())
        if not as_json:
            _report(batches[-1], as_json=False)

    replay_files(
        spark,
        files,
        spec=spec,
        topic_prefix=topic_prefix,
        max_records=max_records,
        on_batch=report,
        lock_wait_s=lock_wait,
        schema_source=_schema_sources(spark, schema_source),
    )
    if as_json:
        typer.echo(json.dumps(batches, indent=2, default=str))
    elif not batches:
        console.print("nothing new to apply (already replayed)")
    elif len(batches) > 1:
        console.print(
            f"{len(batches)} batches, {sum(b['records'] for b in batches)} records, "
            f"{sum(b['dead_lettered'] for b in batches)} dead-lettered",
            highlight=False,
        )
    _exit_on_dead_letters(batches, allow_dead_letters)
