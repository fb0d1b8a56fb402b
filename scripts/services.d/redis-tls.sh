# shellcheck shell=bash
# redis-tls: a second Redis 7 (redis.sh's server, its own dir) on ${DBLOCK_REDIS_TLS_PORT:-63840},
#   TLS only (--port 0) with the test certificates (tls.sh): clients must present a
#   certificate of the test CA (--tls-auth-clients yes). Beside it, on the next port, one
#   Sentinel, TLS only too and with a password of its own (the node has none), watching it as
#   master `dblock-tls` (quorum 1, no replica): the Sentinel's discovery over TLS, not its
#   failover (redis-sentinel tests that). `env` prints
#   DBLOCK_TEST_REDIS_TLS_URL=rediss://127.0.0.1:63840?ssl-ca=...&ssl-cert=...&ssl-key=...,
#   DBLOCK_TEST_REDIS_TLS_SENTINEL_URL=redis-sentinel://127.0.0.1:63841/dblock-tls?sentinel-password=...&ssl-ca=...
#   and DBLOCK_TEST_CERTS, the certificates' directory.

rtls_port=${DBLOCK_REDIS_TLS_PORT:-63840}
rtls_sport=$((rtls_port + 1))
rtls_spw=dblock-sentinel-pw  # the Sentinel's password
rtls_cli() { rd_cli_tls=(--tls --cacert "$certs_dir/ca.pem" --cert "$certs_dir/client.pem" --key "$certs_dir/client.key"); }
rtls_sentinel_cli() { rtls_cli; rd_cli_tls+=(--no-auth-warning -a "$rtls_spw"); }
rtls_params() { echo "ssl-ca=$certs_dir/ca.pem&ssl-cert=$certs_dir/client.pem&ssl-key=$certs_dir/client.key"; }
ports_redis-tls() { echo "$rtls_port"; }
peer_ports_redis-tls() { echo "$rtls_sport"; }
running_redis-tls() { [ -n "$(rd_pid "$state/redis-tls")" ] && [ -n "$(rd_pid "$state/redis-tls-sentinel")" ]; }
env_redis-tls() {
  printf 'export DBLOCK_TEST_REDIS_TLS_URL=%q\n' "rediss://127.0.0.1:$rtls_port?$(rtls_params)"
  printf 'export DBLOCK_TEST_REDIS_TLS_SENTINEL_URL=%q\n' "redis-sentinel://127.0.0.1:$rtls_sport/dblock-tls?sentinel-password=$rtls_spw&$(rtls_params)"
  printf 'export DBLOCK_TEST_CERTS=%q\n' "$certs_dir"
}
start_redis-tls() {
  local tls conf
  make_certs
  rtls_cli
  [[ "$rtls_port" =~ ^[0-9]+$ ]] || die "redis-tls: DBLOCK_REDIS_TLS_PORT=$rtls_port is not a port number"
  rd_start redis-tls "$state/redis-tls" "$rtls_port" --port 0 --tls-port "$rtls_port" \
    --tls-cert-file "$certs_dir/server.pem" --tls-key-file "$certs_dir/server.key" \
    --tls-ca-cert-file "$certs_dir/ca.pem" --tls-auth-clients yes
  [ -z "$(rd_pid "$state/redis-tls-sentinel")" ] || return 0
  # The Sentinel reaches the master over TLS too (tls-replication), presenting the server
  # certificate (it is for client use as well). Its file is rewritten at every start.
  tls=$(printf '%s\n' "port 0" "tls-port $rtls_sport" "tls-replication yes" "tls-auth-clients yes" \
          "tls-cert-file $certs_dir/server.pem" "tls-key-file $certs_dir/server.key" \
          "tls-ca-cert-file $certs_dir/ca.pem")
  conf=$(printf '%s\n' "$tls" "requirepass $rtls_spw" "sentinel monitor dblock-tls 127.0.0.1 $rtls_port 1" \
           "sentinel down-after-milliseconds dblock-tls 5000")
  rtls_sentinel_cli
  rds_launch "$state/redis-tls-sentinel" "$rtls_sport" "$conf" --sentinel
  note "redis-tls: Sentinel ready at redis-sentinel://127.0.0.1:$rtls_sport/dblock-tls"
}
stop_redis-tls() {
  rtls_sentinel_cli
  rd_stop "redis-tls sentinel" "$state/redis-tls-sentinel" "$rtls_sport"
  rtls_cli
  rd_stop redis-tls "$state/redis-tls" "$rtls_port"
}
