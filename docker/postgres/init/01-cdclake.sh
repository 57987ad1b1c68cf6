#!/bin/bash
# First-start initialisation of the PostgreSQL source (run by the image's entrypoint from
# /docker-entrypoint-initdb.d, as the admin user, against POSTGRES_DB=demo). Passwords come from
# the environment and are passed as psql variables, so :'var' quotes them safely.
set -euo pipefail

: "${CDC_POSTGRES_DEBEZIUM_PASSWORD:?}" "${CDC_POSTGRES_SIGNAL_PASSWORD:?}" "${CDC_POSTGRES_READER_PASSWORD:?}"
: "${CDC_ICEBERG_DB_PASSWORD:?}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname demo \
  -v dbz_pw="$CDC_POSTGRES_DEBEZIUM_PASSWORD" \
  -v sig_pw="$CDC_POSTGRES_SIGNAL_PASSWORD" \
  -v reader_pw="$CDC_POSTGRES_READER_PASSWORD" \
  -v iceberg_pw="$CDC_ICEBERG_DB_PASSWORD" <<'SQL'
CREATE SCHEMA IF NOT EXISTS inventory;

CREATE TABLE IF NOT EXISTS inventory.debezium_signal (
  id   VARCHAR(42)   PRIMARY KEY,
  type VARCHAR(32)   NOT NULL,
  data VARCHAR(2048) NULL
);

-- Debezium: log in and stream (REPLICATION), read the captured schema, write signals. No
-- superuser, no CREATE: the admin owns the publication below (publication.autocreate.mode=disabled).
CREATE ROLE debezium WITH LOGIN REPLICATION PASSWORD :'dbz_pw';
GRANT CONNECT ON DATABASE demo TO debezium;
GRANT USAGE ON SCHEMA inventory TO debezium;
GRANT SELECT ON ALL TABLES IN SCHEMA inventory TO debezium;
ALTER DEFAULT PRIVILEGES IN SCHEMA inventory GRANT SELECT ON TABLES TO debezium;
GRANT INSERT ON inventory.debezium_signal TO debezium;

-- Publication for pgoutput, created by the admin; covers tables created in the schema later too.
CREATE PUBLICATION cdclake_pub FOR TABLES IN SCHEMA inventory;

-- Signal writer (Airflow): INSERT on the signal table only.
CREATE ROLE cdc_signal WITH LOGIN PASSWORD :'sig_pw';
GRANT CONNECT ON DATABASE demo TO cdc_signal;
GRANT USAGE ON SCHEMA inventory TO cdc_signal;
GRANT INSERT ON inventory.debezium_signal TO cdc_signal;

-- Reader (Airflow): SELECT on the captured schema only (row counts, source-vs-lake reconciliation).
CREATE ROLE cdc_reader WITH LOGIN PASSWORD :'reader_pw';
GRANT CONNECT ON DATABASE demo TO cdc_reader;
GRANT USAGE ON SCHEMA inventory TO cdc_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA inventory TO cdc_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA inventory GRANT SELECT ON TABLES TO cdc_reader;

REVOKE ALL ON DATABASE demo FROM PUBLIC;

-- The Iceberg REST catalog's JDBC catalog (service iceberg-rest), as the local stack's cluster profile
-- bootstraps it: database iceberg_catalog, owned by role iceberg alone.
CREATE ROLE iceberg WITH LOGIN PASSWORD :'iceberg_pw';
CREATE DATABASE iceberg_catalog OWNER iceberg;
REVOKE ALL ON DATABASE iceberg_catalog FROM PUBLIC;
SQL
