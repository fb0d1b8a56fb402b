# shellcheck shell=bash
# postgresql-tls: a second PostgreSQL 15 (postgresql.sh's server, its own data dir) on
#   ${DBLOCK_PG_TLS_PORT:-54339}, TLS only with the test certificates (tls.sh): over TCP the
#   role must present a client certificate of the test CA whose CN is its name (`dblock`,
#   hostssl ... clientcert=verify-full) and its password. `env` prints
#   DBLOCK_TEST_PG_TLS_URL=postgresql://dblock:dblock@127.0.0.1:54339/dblock?sslmode=verify-full&sslrootcert=...&sslcert=...&sslkey=...
#   and DBLOCK_TEST_CERTS, the certificates' directory.

pgtls_port=${DBLOCK_PG_TLS_PORT:-54339}
pgtls_use() {  # points postgresql.sh's functions at this server (call it in a subshell)
  pg_use postgresql-tls "$state/postgresql-tls" "$pgtls_port"
  local c="$pg_dir/certs"  # copies the server (the postgres OS user) can read
  pg_conf="ssl = on
ssl_cert_file = '$c/server.pem'
ssl_key_file = '$c/server.key'
ssl_ca_file = '$c/ca.pem'"
  pg_hba="# Written by scripts/services at every start; edits are lost.
local all all trust
hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-full
hostnossl all all 0.0.0.0/0 reject"
}
ports_postgresql-tls() { echo "$pgtls_port"; }
running_postgresql-tls() { (pgtls_use; running_postgresql); }
env_postgresql-tls() {
  printf 'export DBLOCK_TEST_PG_TLS_URL=%q\n' \
    "postgresql://dblock:dblock@127.0.0.1:$pgtls_port/dblock?sslmode=verify-full&sslrootcert=$certs_dir/ca.pem&sslcert=$certs_dir/client.pem&sslkey=$certs_dir/client.key"
  printf 'export DBLOCK_TEST_CERTS=%q\n' "$certs_dir"
}
start_postgresql-tls() {
  make_certs
  (
    pgtls_use
    mkdir -p "$pg_dir/certs"
    cp "$certs_dir/ca.pem" "$certs_dir/server.pem" "$certs_dir/server.key" "$pg_dir/certs/"
    chmod 600 "$pg_dir/certs/server.key"
    [ "$is_root" = 0 ] || chown -R postgres: "$pg_dir"
    start_postgresql
  )
}
stop_postgresql-tls() { (pgtls_use; stop_postgresql); }
