#!/bin/bash
# First-start initialisation of the MySQL source (run by the image's entrypoint from
# /docker-entrypoint-initdb.d). Passwords come from the environment (the compose .env file).
set -euo pipefail

: "${MYSQL_ROOT_PASSWORD:?}" "${CDC_MYSQL_DEBEZIUM_PASSWORD:?}" "${CDC_MYSQL_SIGNAL_PASSWORD:?}" "${CDC_MYSQL_READER_PASSWORD:?}"

# SQL string literal body: double backslashes and single quotes.
sql_escape() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g"; }
dbz_pw="$(sql_escape "$CDC_MYSQL_DEBEZIUM_PASSWORD")"
sig_pw="$(sql_escape "$CDC_MYSQL_SIGNAL_PASSWORD")"
reader_pw="$(sql_escape "$CDC_MYSQL_READER_PASSWORD")"

MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket -uroot <<SQL
CREATE DATABASE IF NOT EXISTS demo;

CREATE TABLE IF NOT EXISTS demo.debezium_signal (
  id   VARCHAR(42)   PRIMARY KEY,
  type VARCHAR(32)   NOT NULL,
  data VARCHAR(2048) NULL
);

-- Debezium connector user: exactly the binlog-reading privileges, plus INSERT on the signal table.
CREATE USER IF NOT EXISTS 'debezium'@'%' IDENTIFIED BY '${dbz_pw}';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'debezium'@'%';
GRANT INSERT ON demo.debezium_signal TO 'debezium'@'%';

-- Signal writer (Airflow): INSERT on the signal table only.
CREATE USER IF NOT EXISTS 'cdc_signal'@'%' IDENTIFIED BY '${sig_pw}';
GRANT INSERT ON demo.debezium_signal TO 'cdc_signal'@'%';

-- Reader (Airflow): SELECT on demo.* only (row counts, source-vs-lake reconciliation).
CREATE USER IF NOT EXISTS 'cdc_reader'@'%' IDENTIFIED BY '${reader_pw}';
GRANT SELECT ON demo.* TO 'cdc_reader'@'%';

FLUSH PRIVILEGES;
SQL
