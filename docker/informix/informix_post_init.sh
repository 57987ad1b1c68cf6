#!/bin/bash
# Post-init hook of the Informix developer image (RUN_FILE_POST_INIT), run once as `informix`
# after the instance is initialised. Debezium's Informix connector opens its CDC session against
# the `syscdcv1` database, which the DBA must create with $INFORMIXDIR/etc/syscdcv1.sql.
# The captured database must be logged (WITH LOG) for CDC.
dbaccess sysadmin "$INFORMIXDIR/etc/syscdcv1.sql" >>"$INIT_LOG" 2>&1

dbaccess sysmaster - >>"$INIT_LOG" 2>&1 <<'SQL'
CREATE DATABASE demo WITH LOG;
DATABASE demo;
CREATE TABLE debezium_signal (
  id   VARCHAR(42)   PRIMARY KEY,
  type VARCHAR(32)   NOT NULL,
  data LVARCHAR(2048)
);
SQL
