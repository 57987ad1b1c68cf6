"""Redelivered and reordered records, within Debezium's delivery guarantees, leave the lake as the clean capture does.

Debezium delivers at least once, in order within one topic partition, with no order between topics. A connector
crash or restart re-sends events it had already written: the same records again, appended to their partition at
new, higher offsets, so a contiguous run of already-delivered events reappears later in the same partition. From
a real capture the test builds, per seed (``random.Random(seed)``), a log Debezium could have written and a
consumer could have read:

* **redelivery**: in one or more partitions (data topics, the transaction metadata topic, notifications), a
  contiguous run of records is copied and re-inserted after its own last record (right after it, like a producer
  retry, or after later records, like a restart), possibly several times, possibly overlapping earlier copies.
  Every partition is then numbered again from its first offset: a record's first delivery keeps its place
  relative to every other first delivery of its partition, and each copy comes after the record it copies;
* **reordering across topics**: the partitions' records are interleaved at random into one read order (never
  reordering one partition's records by offset);
* **batching**: the read order is cut at random points into 1 to 4 consecutive batches; each batch sees the log
  grown so far (like the ``ingest`` fixture of ``tests/unit/ingest/conftest.py``), so cuts fall inside
  transactions and between a record and its copy.

The clean capture, in one batch under a prefix of its own, is the reference. Every lake table of the perturbed
run must hold the reference's rows, column by column, except the columns written at ingestion time
(``_cdc_ingested_at``, a tombstone's ``_cdc_deleted_at``); a row's Kafka offset (``_cdc_offset`` and the offset
component of ``_cdc_position``) is compared after mapping it back to the clean capture's offset of the same
record, since a redelivered copy may legitimately be the one applied. Every batch's checks must pass, nothing
may be dead-lettered, and the last batch, which reads the whole log, must hold no transaction back (every
transaction of the log is complete, so a held one would stall the source).

The batches run on the records' clock (``transactions.record_clock()``, as ``replay_files`` does): the captures
are days old, and on the wall clock a transaction cut by a batch boundary would expire (documented, not a
fault) instead of being held until the next batch.

Seeds: ``CDC_RELIABILITY_SEEDS`` per capture (default 6, about 3 minutes on 2 cores); a failure names its seed,
its redelivered runs, its batch cuts and what each batch held.
"""

from __future__ import annotations

import json
import os
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.decode.columns import META_COLUMNS, Origin
from cdclake.decode.records import records_from_dicts
from cdclake.ingest.batch import run_batch
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.sources import FrameRecordSource, source_topic_patterns
from cdclake.ingest.summary import BatchSummary
from cdclake.ingest.transactions import record_clock
from cdclake.lake.names import TOMBSTONE_SUFFIX

pytestmark = [pytest.mark.reliability, pytest.mark.spark]

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
SEEDS = range(int(os.environ.get("CDC_RELIABILITY_SEEDS", "6")))
MAX_BATCHES = 4

Coordinates = tuple[str, int, int]  # topic, partition, offset
Record = dict[str, Any]

#: columns the ingestion job writes from its own clock: never equal between two runs
VOLATILE = frozenset({c.name for c in META_COLUMNS if c.origin is Origin.INGEST} | {"_cdc_deleted_at"})


@dataclass(frozen=True)
class Capture:
    """A recorded capture and how to move it under another topic prefix."""

    name: str
    file: str
    rename: Callable[[str, str], str]  # (line, prefix) -> line

    def load(self, prefix: str) -> list[Record]:
        return [json.loads(self.rename(line, prefix)) for line in (CAPTURES / self.file).read_text().splitlines()]


CAPTURE_LIST = [
    # prefix "captx" is nothing else in the file: topics, schema names, source.name, headers
    Capture("pg", "pg_multi_table_tx.jsonl", lambda line, prefix: line.replace("captx", prefix)),
    # prefix "maria": leave "mariadb" (connector, binlog file, Source schema name) alone
    Capture("mariadb", "mariadb_truncate_tx.jsonl", lambda line, prefix: re.sub(r"\bmaria(?!db)", prefix, line)),
]
CAPTURES_BY_NAME = {c.name: c for c in CAPTURE_LIST}


@dataclass
class Perturbed:
    """A perturbed log: its records in read order, where each came from, and how it was made."""

    seed: int
    records: list[Record]
    #: (topic, partition, offset) of every record -> its offset in the clean capture
    origin: dict[Coordinates, int]
    #: the length of the log each batch sees (the last one is the whole log)
    cuts: list[int]
    redelivered: list[str] = field(default_factory=list)
    duplicates: int = 0

    def describe(self) -> str:
        return (
            f"seed {self.seed}: {len(self.records)} records ({self.duplicates} redelivered copies), "
            f"batches end at read positions {self.cuts}; redelivered runs (their clean offsets, inserted at "
            f"index n of the partition): {'; '.join(self.redelivered) or 'none'}"
        )


def _partitions(records: list[Record]) -> dict[tuple[str, int], list[Record]]:
    out: dict[tuple[str, int], list[Record]] = {}
    for r in sorted(records, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return out


def _is_data_topic(topic: str, prefix: str) -> bool:
    return topic != f"{prefix}.transaction" and not topic.endswith(".notifications")


def perturb(clean: list[Record], prefix: str, seed: int) -> Perturbed:
    """Redeliver runs of records, interleave the partitions and cut the read order into batches (module docstring)."""
    rng = random.Random(seed)
    partitions = _partitions(clean)
    tps = sorted(partitions)
    runs = {tp: rng.choice([0, 0, 1, 1, 2, 3]) for tp in tps}
    data = [tp for tp in tps if _is_data_topic(tp[0], prefix)]
    if not any(runs[tp] for tp in data):  # every seed redelivers some data events
        runs[rng.choice(data)] += 1
    redelivered: list[str] = []
    sequences: dict[tuple[str, int], list[Record]] = {}
    for tp in tps:
        seq = list(partitions[tp])
        for _ in range(runs[tp]):
            start = rng.randrange(len(seq))
            length = rng.randint(1, max(1, min(len(seq) - start, (len(seq) + 1) // 2)))
            end = start + length
            at = rng.randint(end, len(seq))  # after the run's own last record: right after it, or later
            seq[at:at] = seq[start:end]
            offsets = [r["offset"] for r in seq[at : at + length]]
            redelivered.append(f"{tp[0].removeprefix(prefix + '.')}/{tp[1]} {offsets} at {at}")
        sequences[tp] = seq
    # one read order: a uniformly random interleaving of the partitions, each in its own order
    pending = {tp: list(reversed(seq)) for tp, seq in sequences.items()}
    next_offset = {tp: partitions[tp][0]["offset"] for tp in tps}
    records: list[Record] = []
    origin: dict[Coordinates, int] = {}
    while pending:
        tp = rng.choices(list(pending), weights=[len(s) for s in pending.values()])[0]
        record = pending[tp].pop()
        if not pending[tp]:
            del pending[tp]
        offset = next_offset[tp]
        next_offset[tp] += 1
        origin[(tp[0], tp[1], offset)] = record["offset"]
        records.append({**record, "offset": offset})
    batches = rng.randint(1, MAX_BATCHES)
    cuts = sorted(rng.sample(range(1, len(records)), batches - 1)) + [len(records)]
    return Perturbed(seed, records, origin, cuts, redelivered, len(records) - len(clean))


def run_batches(spark: SparkSession, prefix: str, records: list[Record], cuts: list[int]) -> list[BatchSummary]:
    """One batch per cut, each over the log grown so far, on the records' clock (see the module docstring)."""
    summaries = []
    source = SourceConfig(name=prefix, topic_prefix=prefix)
    with record_clock():
        for cut in cuts:
            frame = records_from_dicts(spark, records[:cut])
            summaries.append(run_batch(spark, source, FrameRecordSource(frame, source_topic_patterns(prefix))))
    return summaries


def lake_tables(spark: SparkSession, prefix: str) -> list[str]:
    """Every table under ``lake.<prefix>`` (any namespace depth), as identifiers without the catalog."""
    tables: list[str] = []
    namespaces = [prefix]
    while namespaces:
        ns = namespaces.pop()
        namespaces += [r["namespace"] for r in spark.sql(f"SHOW NAMESPACES IN lake.{ns}").collect()]
        tables += [f"{r['namespace']}.{r['tableName']}" for r in spark.sql(f"SHOW TABLES IN lake.{ns}").collect()]
    return sorted(tables)


def read_lake(spark: SparkSession, prefix: str, origin: dict[Coordinates, int]) -> dict[str, list[tuple[Any, ...]]]:
    """Every lake table of ``prefix`` (named without it) as sorted rows of its deterministic columns, with each
    row's Kafka offset mapped back to the clean capture's (``origin``) and its topic without the prefix."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for identifier in lake_tables(spark, prefix):
        frame = spark.table(f"lake.{identifier}")
        columns = [c for c in frame.columns if c not in VOLATILE]
        # the topic of the table's records: <prefix>.<schema>.<table> (the tombstone table: its base table's)
        topic = identifier.removesuffix(TOMBSTONE_SUFFIX)
        rows = []
        for row in frame.select(*columns).collect():
            values = row.asDict()
            if "_cdc_topic" in values:
                assert values["_cdc_topic"] == topic, (identifier, values)
                values["_cdc_topic"] = topic.removeprefix(prefix + ".")
            position = values.get("_cdc_position")
            if position is not None:  # [..., partition, offset]
                partition, offset = int(position[-2]), int(position[-1])
                if "_cdc_offset" in values:
                    assert (values["_cdc_partition"], values["_cdc_offset"]) == (partition, offset), values
                    values["_cdc_offset"] = origin[(topic, partition, offset)]
                values["_cdc_position"] = [*position[:-1], Decimal(origin[(topic, partition, offset)])]
            rows.append(tuple((c, _comparable(values[c])) for c in columns))
        out[identifier.removeprefix(prefix + ".")] = sorted(rows, key=repr)
    return out


def _comparable(value: Any) -> Any:
    return repr(value) if isinstance(value, float) else value  # NaN != NaN


def _identity(records: list[Record]) -> dict[Coordinates, int]:
    return {(r["topic"], r["partition"], r["offset"]): r["offset"] for r in records}


@pytest.fixture(scope="module")
def reference(spark: SparkSession) -> Callable[[str], dict[str, list[tuple[Any, ...]]]]:
    """The lake of a clean capture, ingested once in one batch under a prefix of its own (per capture, cached)."""
    lakes: dict[str, dict[str, list[tuple[Any, ...]]]] = {}

    def get(name: str) -> dict[str, list[tuple[Any, ...]]]:
        if name not in lakes:
            prefix = f"ref{uuid.uuid4().hex[:8]}"
            clean = CAPTURES_BY_NAME[name].load(prefix)
            (summary,) = run_batches(spark, prefix, clean, [len(clean)])
            result = summary.as_dict()
            assert result["checks"]["ok"] and result["dead_lettered"] == 0, result
            assert result["transactions"]["counts"]["held"] == 0, result["transactions"]
            lake = read_lake(spark, prefix, _identity(clean))
            tables = [t for t in lake if not t.endswith(TOMBSTONE_SUFFIX)]
            assert tables and all(lake[t] for t in tables), f"{name}: the clean capture left an empty lake: {lake}"
            lakes[name] = lake
        return lakes[name]

    return get


def _batch_line(summary: dict[str, Any], prefix: str) -> str:
    tx = summary.get("transactions") or {}
    counts = {k: n for k, n in (tx.get("counts") or {}).items() if n}
    cuts = {k.removeprefix(prefix + "."): v for k, v in (tx.get("cuts") or {}).items()}
    return f"{summary['status']}, {summary['records']} records read, transactions {counts} {tx.get('ids') or ''}, cuts {cuts}"


def _difference(got: dict[str, list[Any]], want: dict[str, list[Any]]) -> str:
    lines = []
    for table in sorted(set(got) | set(want)):
        if table not in got or table not in want:
            lines.append(f"{table}: only in the {'reference' if table in want else 'perturbed run'}")
            continue
        extra = [r for r in got[table] if r not in want[table]]
        missing = [r for r in want[table] if r not in got[table]]
        if extra or missing or len(got[table]) != len(want[table]):
            counts = f"{len(got[table])} rows vs {len(want[table])}"
            lines.append(f"{table}: {counts}; not in the reference: {extra}; missing: {missing}")
    return "\n".join(lines)


def _cases() -> list[Any]:
    return [pytest.param(c.name, seed, id=f"{c.name}-{seed}") for c in CAPTURE_LIST for seed in SEEDS]


@pytest.mark.parametrize(("capture", "seed"), _cases())
def test_redelivered_and_reordered_records_give_the_clean_lake(
    spark: SparkSession, reference: Callable[[str], dict[str, list[tuple[Any, ...]]]], capture: str, seed: int
) -> None:
    want = reference(capture)
    prefix = f"dup{uuid.uuid4().hex[:8]}"
    clean = CAPTURES_BY_NAME[capture].load(prefix)
    log = perturb(clean, prefix, seed)
    what = f"{capture} {log.describe()}"

    # the perturbation stays within the guarantees, and really redelivers records
    assert log.duplicates > 0 and len(log.records) == len(clean) + log.duplicates, what
    assert {(r["topic"], r["key"], r["value"]) for r in log.records} == {
        (r["topic"], r["key"], r["value"]) for r in clean
    }, what
    clean_partitions = _partitions(clean)
    for (topic, partition), records in _partitions(log.records).items():
        firsts: list[int] = []  # clean offsets in the order of their first delivery (copies come after it)
        for r in records:
            clean_offset = log.origin[(topic, partition, r["offset"])]
            if clean_offset not in firsts:
                firsts.append(clean_offset)
        in_order = [r["offset"] for r in clean_partitions.pop((topic, partition))]
        assert firsts == in_order, f"{what}: first deliveries of {topic}/{partition} are not the clean partition"
    assert not clean_partitions, f"{what}: partitions lost: {sorted(clean_partitions)}"

    summaries = [s.as_dict() for s in run_batches(spark, prefix, log.records, log.cuts)]
    what += "".join(f"\n  batch {i}: {_batch_line(s, prefix)}" for i, s in enumerate(summaries, 1))

    for i, summary in enumerate(summaries, 1):
        assert summary["checks"]["ok"], f"{what}\nbatch {i}: {summary['checks']['problems']}"
        assert summary["dead_lettered"] == 0, f"{what}\nbatch {i}: dead letters {summary['dead_letters']}"
    got = read_lake(spark, prefix, log.origin)
    assert got == want, f"{what}\n{_difference(got, want)}"
    # the last batch read the whole log, in which every transaction is complete: it holds nothing back
    held = summaries[-1].get("transactions", {}).get("ids", {}).get("held")
    assert not held, f"{what}\nthe last batch still holds transactions {held}"
