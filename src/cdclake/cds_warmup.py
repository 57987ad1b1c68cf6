"""The driver process :func:`cdclake.cds.build_archive` starts: a Spark driver JVM that writes or maps the archive.

Run as ``python -m cdclake.cds_warmup dump|check ARCHIVE``; a module of its own because it builds a Spark session
(:mod:`cdclake.spark`), which itself asks :mod:`cdclake.cds` for the archive to map.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path


def warm_up(step: str, archive: Path) -> None:
    """In a fresh process: start a driver JVM that writes (``dump``) or must map (``check``) ``archive``.

    ``dump`` runs the SQL an ingestion batch runs on a throwaway embedded lake (create, append, MERGE with
    ``from_json``, metadata tables, aggregation), so the archive holds the classes of a batch, not only
    those of the start.
    """
    from cdclake.lake import LakeConfig
    from cdclake.spark import LOCAL_DRIVER_GC, build_spark_session

    flag = f"-XX:ArchiveClassesAtExit={archive}" if step == "dump" else f"-XX:SharedArchiveFile={archive} -Xshare:on"
    lake_dir = Path(tempfile.mkdtemp(prefix="cdclake-cds-"))
    try:
        # the archive's class path is Spark's jars alone: the decoder jar local drivers append
        # (cdclake.spark.appended_class_path) leaves it a prefix, and spark-submit's drivers have none
        spark = build_spark_session(
            "cdclake-cds",
            lake=LakeConfig.embedded(lake_dir),
            driver_options=[LOCAL_DRIVER_GC, flag],
            local_file_system=step != "dump",
        )
        if step == "dump":
            table = "lake.cds.warm_up"
            spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.cds")
            spark.sql(
                f"CREATE TABLE {table} (id BIGINT, v STRING, d DECIMAL(10,2), ts TIMESTAMP) "
                "USING iceberg TBLPROPERTIES ('format-version'='2')"
            )
            spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 1.50, current_timestamp()), (2, 'b', 2.50, NULL)")
            spark.sql(
                f'MERGE INTO {table} t USING (SELECT from_json(\'{{"id":1,"v":"x"}}\', \'id BIGINT, v STRING\') j) s '
                "ON t.id = s.j.id WHEN MATCHED THEN UPDATE SET v = s.j.v "
                "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.j.id, s.j.v)"
            )
            spark.sql(f"SELECT summary FROM {table}.snapshots").collect()
            spark.table(table).groupBy("v").count().collect()
        else:
            spark.range(3).count()
        spark.stop()
    finally:
        shutil.rmtree(lake_dir, ignore_errors=True)


if __name__ == "__main__":  # the driver process of cdclake.cds.build_archive
    warm_up(sys.argv[1], Path(sys.argv[2]))
