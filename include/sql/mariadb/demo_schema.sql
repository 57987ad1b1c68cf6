-- Demo tables of the local stack's MariaDB (database demo). Idempotent.
-- The shop (customers, products, orders, order_items) is what `cdclake demo` changes: decimals, TIMESTAMP
-- (UTC, with zone) and DATETIME (without), JSON, enums, unicode text, nullable columns, a composite key.
-- all_types holds one column per MariaDB type the decoder maps (docs/decoding.md).
CREATE TABLE IF NOT EXISTS customers (
  id          BIGINT PRIMARY KEY,
  name        VARCHAR(200) NOT NULL,
  email       VARCHAR(200),
  region      CHAR(2),
  created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);
-- the shop's columns, added here so that a database of an earlier schema gets them too
ALTER TABLE customers
  ADD COLUMN IF NOT EXISTS tier        ENUM('bronze', 'silver', 'gold'),
  ADD COLUMN IF NOT EXISTS preferences JSON,
  ADD COLUMN IF NOT EXISTS updated_at  DATETIME(6);

CREATE TABLE IF NOT EXISTS orders (
  id          BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL,
  amount      DECIMAL(12, 2) NOT NULL,
  status      VARCHAR(20) NOT NULL,
  ordered_on  DATE NOT NULL
);
ALTER TABLE orders
  ADD COLUMN IF NOT EXISTS placed_at  TIMESTAMP(6) NULL,
  ADD COLUMN IF NOT EXISTS shipped_at DATETIME(6),
  ADD COLUMN IF NOT EXISTS notes      TEXT;

CREATE TABLE IF NOT EXISTS products (
  id          BIGINT PRIMARY KEY,
  sku         VARCHAR(32) NOT NULL,
  name        VARCHAR(200) NOT NULL,
  category    ENUM('beverage', 'kitchen', 'grocery', 'apparel') NOT NULL,
  price       DECIMAL(10, 2) NOT NULL,
  weight_kg   DECIMAL(8, 3),
  attributes  JSON,
  active      BOOLEAN NOT NULL DEFAULT TRUE,
  created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6)
);

CREATE TABLE IF NOT EXISTS order_items (
  order_id    BIGINT NOT NULL,
  line_no     INT NOT NULL,
  product_id  BIGINT NOT NULL,
  quantity    INT NOT NULL,
  unit_price  DECIMAL(10, 2) NOT NULL,
  discount    DECIMAL(5, 4),
  PRIMARY KEY (order_id, line_no)
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
