# shellcheck shell=bash
# etcd-tls: a second etcd 3.4 single node, TLS only, on ${DBLOCK_ETCD_TLS_PORT:-23809} (its peer
#   port the next one), with the test certificates (tls.sh): clients must present one of the
#   test CA's (--client-cert-auth), and etcd's auth is on. User `locker` (password `locker-pw`)
#   and `dblock` (the client certificate's CN: a certificate alone logs in as it) may read and
#   write every key; `root` (password `root-pw`) administers. `env` prints
#   DBLOCK_TEST_ETCD_TLS_URL=etcds://locker:locker-pw@127.0.0.1:23809/dblock?ssl-ca=...&ssl-cert=...&ssl-key=...
#   and DBLOCK_TEST_CERTS, the certificates' directory.

etls_port=${DBLOCK_ETCD_TLS_PORT:-23809}
etls_dir="$state/etcd-tls"
etls_query() { echo "ssl-ca=$certs_dir/ca.pem&ssl-cert=$certs_dir/client.pem&ssl-key=$certs_dir/client.key"; }
ports_etcd-tls() { echo "$etls_port"; }
peer_ports_etcd-tls() { echo $((etls_port + 1)); }
etls_ctl() {  # etcdctl against it with the client certificate (after auth: as user dblock)
  ETCDCTL_API=3 etcdctl --endpoints "https://127.0.0.1:$etls_port" --cacert "$certs_dir/ca.pem" \
    --cert "$certs_dir/client.pem" --key "$certs_dir/client.key" --dial-timeout 2s --command-timeout 5s "$@" 9>&-
}
# Healthy: an answer over TLS (a permission error once auth is on still is one).
etls_ready() { etls_ctl endpoint health >/dev/null 2>&1; }
running_etcd-tls() { [ -n "$(etcd_pid "$etls_dir")" ]; }
env_etcd-tls() {
  printf 'export DBLOCK_TEST_ETCD_TLS_URL=%q\n' "etcds://locker:locker-pw@127.0.0.1:$etls_port/dblock?$(etls_query)"
  printf 'export DBLOCK_TEST_CERTS=%q\n' "$certs_dir"
}
start_etcd-tls() {
  make_certs
  etcd_start etcd-tls "$etls_dir" "$etls_port" https etls_ready \
    "etcds://127.0.0.1:$etls_port/dblock" \
    --cert-file "$certs_dir/server.pem" --key-file "$certs_dir/server.key" \
    --trusted-ca-file "$certs_dir/ca.pem" --client-cert-auth
  [ -e "$etls_dir/auth-enabled" ] && return 0
  # The users and the role, once: they live in the data dir.
  { etls_ctl user add root --new-user-password root-pw &&
    etls_ctl role add locker &&
    etls_ctl role grant-permission locker --prefix=true readwrite / &&
    etls_ctl user add locker --new-user-password locker-pw && etls_ctl user grant-role locker locker &&
    etls_ctl user add dblock --no-password && etls_ctl user grant-role dblock locker &&
    etls_ctl auth enable; } >/dev/null 2>"$etls_dir/auth.err" ||
    { note "etcd-tls: could not set up its users"; log_tail "$etls_dir/auth.err"; exit 1; }
  touch "$etls_dir/auth-enabled"
}
stop_etcd-tls() { etcd_stop etcd-tls "$etls_dir"; }
