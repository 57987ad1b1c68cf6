-- Demo tables of the local stack's PostgreSQL (database demo, schema inventory), owned by cdclake_app.
-- Idempotent. The shop (customers, products, orders, order_items) is what `cdclake demo` changes: decimals,
-- timestamps with and without time zone, JSON, enums, unicode text, nullable columns, a composite key.
-- all_types holds one column per PostgreSQL type the decoder maps (docs/decoding.md).
DO $$ BEGIN
  CREATE TYPE inventory.mood AS ENUM ('sad', 'ok', 'happy');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$ BEGIN
  CREATE TYPE inventory.customer_tier AS ENUM ('bronze', 'silver', 'gold');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$ BEGIN
  CREATE TYPE inventory.product_category AS ENUM ('beverage', 'kitchen', 'grocery', 'apparel');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS inventory.customers (
  id          bigint PRIMARY KEY,
  name        text NOT NULL,
  email       varchar(200),
  region      char(2),
  created_at  timestamptz NOT NULL DEFAULT now()
);
-- the shop's columns, added here so that a database of an earlier schema gets them too
ALTER TABLE inventory.customers
  ADD COLUMN IF NOT EXISTS tier        inventory.customer_tier,
  ADD COLUMN IF NOT EXISTS preferences jsonb,
  ADD COLUMN IF NOT EXISTS updated_at  timestamp(6);

CREATE TABLE IF NOT EXISTS inventory.orders (
  id          bigint PRIMARY KEY,
  customer_id bigint NOT NULL,
  amount      numeric(12, 2) NOT NULL,
  status      text NOT NULL,
  ordered_on  date NOT NULL
);
ALTER TABLE inventory.orders
  ADD COLUMN IF NOT EXISTS placed_at  timestamptz,
  ADD COLUMN IF NOT EXISTS shipped_at timestamp(6),
  ADD COLUMN IF NOT EXISTS notes      text;

CREATE TABLE IF NOT EXISTS inventory.products (
  id          bigint PRIMARY KEY,
  sku         varchar(32) NOT NULL,
  name        text NOT NULL,
  category    inventory.product_category NOT NULL,
  price       numeric(10, 2) NOT NULL,
  weight_kg   numeric(8, 3),
  attributes  jsonb,
  active      boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamp(6)
);

CREATE TABLE IF NOT EXISTS inventory.order_items (
  order_id    bigint NOT NULL,
  line_no     integer NOT NULL,
  product_id  bigint NOT NULL,
  quantity    integer NOT NULL,
  unit_price  numeric(10, 2) NOT NULL,
  discount    numeric(5, 4),
  PRIMARY KEY (order_id, line_no)
);

CREATE TABLE IF NOT EXISTS inventory.all_types (
  id            integer PRIMARY KEY,
  c_smallint    smallint,
  c_integer     integer,
  c_bigint      bigint,
  c_real        real,
  c_double      double precision,
  c_numeric     numeric(12, 4),
  c_numeric_big numeric(50, 10),
  c_numeric_var numeric,
  c_money       money,
  c_bool        boolean,
  c_text        text,
  c_varchar     varchar(40),
  c_char        char(5),
  c_bytea       bytea,
  c_date        date,
  c_time        time(6),
  c_timetz      time(6) with time zone,
  c_timestamp   timestamp(6),
  c_timestamptz timestamp(6) with time zone,
  c_interval    interval,
  c_uuid        uuid,
  c_json        json,
  c_jsonb       jsonb,
  c_xml         xml,
  c_int_array   integer[],
  c_text_array  text[],
  c_bit         bit(8),
  c_varbit      bit varying(16),
  c_enum        inventory.mood,
  c_point       point,
  c_inet        inet,
  c_big_text    text          -- TOASTed when large: unchanged in an UPDATE => placeholder
);
