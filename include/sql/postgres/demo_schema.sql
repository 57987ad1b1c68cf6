-- Demo tables of the local stack's PostgreSQL (database demo, schema inventory), owned by cdclake_app.
-- Idempotent. all_types holds one column per PostgreSQL type the decoder maps (docs/decoding.md).
DO $$ BEGIN
  CREATE TYPE inventory.mood AS ENUM ('sad', 'ok', 'happy');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS inventory.customers (
  id          bigint PRIMARY KEY,
  name        text NOT NULL,
  email       varchar(200),
  region      char(2),
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS inventory.orders (
  id          bigint PRIMARY KEY,
  customer_id bigint NOT NULL,
  amount      numeric(12, 2) NOT NULL,
  status      text NOT NULL,
  ordered_on  date NOT NULL
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
