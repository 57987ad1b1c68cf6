// Healthcheck of the mongodb service (mongosh --file). Initiates the single-member replica set
// rs0 on first run, then reports healthy only once rs0 is initiated and this member is PRIMARY.
let status;
try {
  status = rs.status();
} catch (e) {
  if (e.codeName !== "NotYetInitialized") throw e;
  rs.initiate({ _id: "rs0", members: [{ _id: 0, host: "mongodb:27017" }] });
  quit(1); // not healthy yet: the next probe checks the initiated set
}
if (status.ok !== 1 || status.set !== "rs0" || !db.hello().isWritablePrimary) {
  quit(1);
}
