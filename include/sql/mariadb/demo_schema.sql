-- Demo tables of the local stack's MariaDB (database demo). Idempotent.
-- all_types holds one column per MariaDB type the decoder maps (docs/decoding.md).
CREATE TABLE IF NOT EXISTS customers (
  id          BIGINT PRIMARY KEY,
  name        VARCHAR(200) NOT NULL,
  email       VARCHAR(200),
  region      CHAR(2),
  created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);

CREATE TABLE IF NOT EXISTS orders (
  id          BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL,
  amount      DECIMAL(12, 2) NOT NULL,
  status      VARCHAR(20) NOT NULL,
  ordered_on  DATE NOT NULL
);

CREATE TABLE IF NOT EXISTS all_types (
  id              INT PRIMARY KEY,
  c_tinyint       TINYINT,
  c_tinyint_u     TINYINT UNSIGNED,
  c_bool          TINYINT(1),
  c_smallint_u    SMALLINT UNSIGNED,
  c_mediumint     MEDIUMINT,
  c_int_u         INT UNSIGNED,
  c_bigint        BIGINT,
  c_bigint_u      BIGINT UNSIGNED,
  c_float         FLOAT,
  c_double        DOUBLE,
  c_decimal       DECIMAL(12, 4),
  c_decimal_big   DECIMAL(65, 10),
  c_bit1          BIT(1),
  c_bit12         BIT(12),
  c_char          CHAR(5),
  c_varchar       VARCHAR(40),
  c_text          TEXT,
  c_blob          BLOB,
  c_binary        BINARY(4),
  c_varbinary     VARBINARY(16),
  c_date          DATE,
  c_time          TIME(6),
  c_datetime      DATETIME(6),
  c_timestamp     TIMESTAMP(6) NULL,
  c_year          YEAR,
  c_enum          ENUM('sad', 'ok', 'happy'),
  c_set           SET('a', 'b', 'c'),
  c_json          JSON,
  c_point         POINT
);
