#!/bin/bash
# The cluster image's two servers, configured as the local stack's cluster profile configures them
# (src/cdclake/stack/cluster.py: S3ProxyService.properties, IcebergRestService.server_environment):
#
#   entrypoint.sh s3proxy        S3 over /data (bucket "warehouse"), AWS signatures with CDC_S3_ACCESS_KEY_ID /
#                                CDC_S3_SECRET_ACCESS_KEY
#   entrypoint.sh iceberg-rest   Iceberg's REST catalog server (its CATALOG_* variables come from compose), its
#                                JDBC password from CDC_ICEBERG_DB_PASSWORD through a .pgpass file, its S3 keys
#                                through AWS's variables: never as catalog properties, which the server logs
#
# Secrets are written to private files in RUN_DIR and removed from the environment before exec. The image's
# paths and ports are defaults, so that tests/unit/test_docker_compose.py can run this script on the local jars.
set -euo pipefail
umask 077
JARS="${CDC_CLUSTER_JARS:-/opt/cdclake/cluster}"
DATA="${CDC_S3_DATA:-/data}"
RUN_DIR="${CDC_RUN_DIR:-/run/cdclake}"

case "${1:-}" in
  s3proxy)
    : "${CDC_S3_ACCESS_KEY_ID:?}" "${CDC_S3_SECRET_ACCESS_KEY:?}"
    mkdir -p "$DATA/warehouse"
    cat > "$RUN_DIR/s3proxy.properties" <<PROPERTIES
s3proxy.endpoint=http://0.0.0.0:${CDC_S3_PORT:-9000}
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=${CDC_S3_ACCESS_KEY_ID}
s3proxy.credential=${CDC_S3_SECRET_ACCESS_KEY}
jclouds.provider=filesystem
jclouds.filesystem.basedir=${DATA}
PROPERTIES
    unset CDC_S3_ACCESS_KEY_ID CDC_S3_SECRET_ACCESS_KEY
    exec java -Xmx256m -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
      -jar "$(ls "$JARS"/s3proxy/s3proxy-*.jar)" --properties "$RUN_DIR/s3proxy.properties"
    ;;
  iceberg-rest)
    : "${CDC_ICEBERG_DB_PASSWORD:?}" "${CDC_S3_ACCESS_KEY_ID:?}" "${CDC_S3_SECRET_ACCESS_KEY:?}" "${CATALOG_URI:?}"
    # host:port:database:user:password of the JDBC catalog's URI (jdbc:postgresql://host:port/database)
    target="${CATALOG_URI#jdbc:postgresql://}"
    printf '%s:%s:%s:%s:%s\n' "${target%%:*}" "$(echo "${target#*:}" | cut -d/ -f1)" "${target#*/}" \
      "${CATALOG_JDBC_USER:?}" "$CDC_ICEBERG_DB_PASSWORD" > "$RUN_DIR/pgpass"
    export PGPASSFILE="$RUN_DIR/pgpass"
    export AWS_ACCESS_KEY_ID="$CDC_S3_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$CDC_S3_SECRET_ACCESS_KEY"
    unset CDC_ICEBERG_DB_PASSWORD CDC_S3_ACCESS_KEY_ID CDC_S3_SECRET_ACCESS_KEY
    cd "$RUN_DIR"
    exec java -Xmx384m -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Dcdclake.rest.host=0.0.0.0 \
      -cp "$JARS/iceberg-rest/*" dev.cdclake.rest.RestCatalogLauncher
    ;;
  *)
    echo "usage: entrypoint.sh s3proxy|iceberg-rest" >&2
    exit 2
    ;;
esac
