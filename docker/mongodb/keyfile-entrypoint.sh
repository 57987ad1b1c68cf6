#!/bin/bash
# A replica set with authorization needs a keyFile for internal authentication, even with one
# member. Generate one per container start (single member: nothing else has to share it), then
# hand over to the image's entrypoint, which strips --replSet/--keyFile for its init phase.
set -euo pipefail
keyfile=/etc/mongo-keyfile
tr -dc 'A-Za-z0-9' </dev/urandom | head -c 756 >"$keyfile"
chmod 400 "$keyfile"
chown mongodb:mongodb "$keyfile"
exec docker-entrypoint.sh "$@"
