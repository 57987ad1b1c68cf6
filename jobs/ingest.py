"""spark-submit entry point: one ingestion batch of one connector spec into the lake.

    spark-submit --jars <.cache/jvm/spark/*.jar> jobs/ingest.py --spec postgres [--max-records N] \
        [--lake DIR] [--summary-json PATH] [--lock-wait SECONDS] [--schema-source database|lake|FILE.json] \
        [--accept-gap TOPIC[:PARTITION] ...] [--accepted-by NAME] \
        [--follow [--poll S] [--run-for S] [--max-batches N] [--keep-snapshots N] [--compact-every N]]

Parses arguments, builds the session, calls :func:`cdclake.ingest.runner.ingest_from_kafka`. When another run
holds the source's lock past --lock-wait, the summary says ``"status": "source-busy"`` (exit status 0: the
run did nothing, and that is not a failure). When Kafka no longer holds the offsets a topic-partition continues
from (records deleted before they were ingested, a topic re-created), the job fails with
:class:`~cdclake.exceptions.OffsetGapError` before reading anything; ``--accept-gap`` accepts the loss for one run.

With ``--follow`` the job keeps running batches as records arrive, on its one Spark session
(:mod:`cdclake.ingest.follow`), logging a line per batch, until SIGTERM (after the batch in progress),
``--run-for`` seconds or ``--max-batches`` batches; the summary is then the run's (``"mode": "follow"``, its
batch counts and its last batch).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from functools import partial
from pathlib import Path

from cdclake.databases.schema_source import schema_source_for
from cdclake.exceptions import SourceBusyError
from cdclake.ingest.follow import COMPACT_EVERY_DEFAULT, KEEP_SNAPSHOTS_DEFAULT, FollowOptions, StopFlag, batch_line
from cdclake.ingest.lock import DEFAULT_WAIT_S
from cdclake.ingest.offsets import GapAcceptance
from cdclake.ingest.runner import busy_summary, follow_kafka, ingest_from_kafka
from cdclake.ingest.summary import BatchSummary
from cdclake.lake import LakeConfig
from cdclake.lake import rows as lake_rows
from cdclake.spark import build_spark_session


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="connector spec name or path")
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument("--lake", type=Path, default=None, help="embedded lake directory")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: from the spec)")
    parser.add_argument("--summary-json", type=Path, default=None)
    parser.add_argument("--lock-wait", type=float, default=None, help="seconds to wait for the source's lock")
    parser.add_argument(
        "--schema-source",
        default=None,
        help="column types of schema-less records: database, lake or a JSON file (default: the spec's "
        "converters.schema_source)",
    )
    parser.add_argument(
        "--accept-gap",
        action="append",
        default=[],
        metavar="TOPIC[:PARTITION]",
        help="accept, for this run, that Kafka lost records of this topic-partition (or of every partition of "
        "TOPIC) before they were ingested, or that the topic was re-created: start at the log start and record "
        "the gap in the summary (accepted_gaps); repeatable, or comma-separated (a blank value accepts nothing)",
    )
    parser.add_argument(
        "--accepted-by",
        default=None,
        help="who accepts the gaps, as recorded with them (default, also when blank: the current user)",
    )
    parser.add_argument("--follow", action="store_true", help="keep running batches as records arrive")
    parser.add_argument("--poll", type=float, default=1.0, help="with --follow: seconds between looks at Kafka")
    parser.add_argument("--run-for", type=float, default=None, help="with --follow: stop after this many seconds")
    parser.add_argument("--max-batches", type=int, default=None, help="with --follow: stop after this many batches")
    parser.add_argument(
        "--keep-snapshots",
        type=int,
        default=None,
        help="with --follow: snapshots kept of each table written (0: all, left to the maintenance; "
        f"default {KEEP_SNAPSHOTS_DEFAULT})",
    )
    parser.add_argument(
        "--compact-every",
        type=int,
        default=None,
        help="with --follow: compact the small files of each table written after every this many batches that "
        "changed it, and the lake's audit tables after every 100th batch (0: left to the maintenance; default "
        f"{COMPACT_EVERY_DEFAULT})",
    )
    args = parser.parse_args(argv)
    if args.follow and args.accept_gap:
        parser.error("--accept-gap is for one run: accept the gap without --follow, then follow")
    follow_only = {"--run-for": args.run_for, "--max-batches": args.max_batches,
                   "--keep-snapshots": args.keep_snapshots, "--compact-every": args.compact_every}  # fmt: skip
    given = [name for name, value in follow_only.items() if value is not None]
    if given and not args.follow:
        parser.error(f"{', '.join(given)} go(es) with --follow")
    negative = [name for name, value in follow_only.items() if value is not None and value < 0]
    if negative:
        parser.error(f"{', '.join(negative)} must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    accept = GapAcceptance.parse(args.accept_gap, args.accepted_by)  # before Spark starts: a typo fails at once
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    spark = build_spark_session("cdclake-ingest", lake=LakeConfig.from_env(args.lake))
    wait = DEFAULT_WAIT_S if args.lock_wait is None else args.lock_wait
    if args.follow:
        return _follow(spark, args, wait)
    try:
        summary = ingest_from_kafka(
            spark,
            args.spec,
            bootstrap=args.bootstrap,
            max_records=args.max_records,
            lock_wait_s=wait,
            schema_source=partial(
                schema_source_for, override=args.schema_source, catalog=lake_rows.session_catalog(spark)
            ),
            accept_gaps=accept,
        ).as_dict()
    except SourceBusyError as exc:
        logging.getLogger("cdclake.jobs.ingest").warning("%s", exc)
        summary = busy_summary(args.spec, str(exc))
    finally:
        spark.stop()
    _write_summary(summary, args.summary_json)
    return 0


def follow_options(args: argparse.Namespace, lock_wait_s: float) -> FollowOptions:
    """The follower's options of the parsed ``args``."""
    return FollowOptions.from_flags(
        poll_s=args.poll,
        run_for_s=args.run_for,
        max_batches=args.max_batches,
        max_records=args.max_records,
        lock_wait_s=lock_wait_s,
        keep_snapshots=args.keep_snapshots,
        compact_every=args.compact_every,
    )


def _follow(spark, args: argparse.Namespace, lock_wait_s: float) -> int:  # type: ignore[no-untyped-def]
    """``--follow``: batches until SIGTERM or a limit; a log line per batch, then the run's summary."""
    log = logging.getLogger("cdclake.jobs.ingest")

    def on_batch(batch: BatchSummary) -> None:
        log.info("%s", batch_line(batch.as_dict()))

    options = follow_options(args, lock_wait_s)
    stop = StopFlag()
    try:
        with stop.on_signals():
            summary = follow_kafka(
                spark,
                args.spec,
                bootstrap=args.bootstrap,
                schema_source=partial(
                    schema_source_for, override=args.schema_source, catalog=lake_rows.session_catalog(spark)
                ),
                options=options,
                stop=stop,
                on_batch=on_batch,
            ).as_dict()
    finally:
        spark.stop()
    _write_summary(summary, args.summary_json)
    return 0


def _write_summary(summary: dict[str, object], path: Path | None) -> None:
    text = json.dumps(summary, indent=2, default=str)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
