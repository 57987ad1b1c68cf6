// First-start initialisation of the MongoDB source (mongosh, run by the image's entrypoint from
// /docker-entrypoint-initdb.d while mongod runs standalone). Passwords come from the environment.
const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (see .env.example)`);
  return value;
};

const demo = db.getSiblingDB("demo");
if (!demo.getCollectionNames().includes("debezium_signal")) {
  demo.createCollection("debezium_signal");
}

const admin = db.getSiblingDB("admin");

// INSERT on the signal collection only (used by both users below).
admin.createRole({
  role: "cdclakeSignalInsert",
  privileges: [{ resource: { db: "demo", collection: "debezium_signal" }, actions: ["insert"] }],
  roles: [],
});

// Debezium: read the captured database and the oplog/config metadata, list databases and replica
// set status (clusterMonitor), insert signals.
admin.createUser({
  user: "debezium",
  pwd: env("CDC_MONGODB_DEBEZIUM_PASSWORD"),
  roles: [
    { role: "read", db: "demo" },
    { role: "read", db: "local" },
    { role: "read", db: "config" },
    { role: "read", db: "admin" },
    { role: "clusterMonitor", db: "admin" },
    { role: "cdclakeSignalInsert", db: "admin" },
  ],
});

// Signal writer (Airflow): insert into demo.debezium_signal only.
admin.createUser({
  user: "cdc_signal",
  pwd: env("CDC_MONGODB_SIGNAL_PASSWORD"),
  roles: [{ role: "cdclakeSignalInsert", db: "admin" }],
});
