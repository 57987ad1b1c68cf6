#!/bin/sh
# Writes the REST API's credentials file (user=password, mode 0600) from CDC_CONNECT_USER and
# CDC_CONNECT_PASSWORD, then starts the Kafka Connect worker without those two variables.
set -eu
: "${CDC_CONNECT_USER:?set CDC_CONNECT_USER}"
: "${CDC_CONNECT_PASSWORD:?set CDC_CONNECT_PASSWORD}"
umask 077
mkdir -p /opt/connect/auth
printf '%s=%s\n' "$CDC_CONNECT_USER" "$CDC_CONNECT_PASSWORD" > /opt/connect/auth/rest-credentials.properties
unset CDC_CONNECT_USER CDC_CONNECT_PASSWORD
export KAFKA_OPTS="${KAFKA_OPTS:-} -Djava.security.auth.login.config=/opt/connect/rest-jaas.conf"
exec /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.connect.cli.ConnectDistributed \
  /opt/connect/connect-distributed.properties
