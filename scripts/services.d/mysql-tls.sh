# shellcheck shell=bash
# mysql-tls: a second MariaDB (mysql.sh's server, its own data dir) on
#   ${DBLOCK_MYSQL_TLS_PORT:-33071}, TLS only (require_secure_transport) with the test
#   certificates (tls.sh). User `locker` (password `locker-pw`) must present a client
#   certificate of the test CA (REQUIRE X509). `env` prints
#   DBLOCK_TEST_MYSQL_TLS_URL=mysql://locker:locker-pw@127.0.0.1:33071/dblock?ssl-ca=...&ssl-cert=...&ssl-key=...
#   and DBLOCK_TEST_CERTS, the certificates' directory.

mytls_port=${DBLOCK_MYSQL_TLS_PORT:-33071}
mytls_use() {  # points mysql.sh's functions at this server (call it in a subshell)
  my_use mysql-tls "$state/mysql-tls" "$mytls_port"
  local c="$my_dir/certs"  # copies the server (the mysql OS user) can read
  my_opts=(--ssl-ca="$c/ca.pem" --ssl-cert="$c/server.pem" --ssl-key="$c/server.key"
           --require-secure-transport=ON)
  my_client_tls=(--ssl --ssl-ca="$certs_dir/ca.pem" --ssl-verify-server-cert)
  my_more_sql="
CREATE USER IF NOT EXISTS 'locker'@'127.0.0.1' IDENTIFIED BY 'locker-pw' REQUIRE X509;
ALTER USER 'locker'@'127.0.0.1' IDENTIFIED BY 'locker-pw' REQUIRE X509;
GRANT ALL PRIVILEGES ON *.* TO 'locker'@'127.0.0.1';
"
}
ports_mysql-tls() { echo "$mytls_port"; }
running_mysql-tls() { (mytls_use; running_mysql); }
env_mysql-tls() {
  printf 'export DBLOCK_TEST_MYSQL_TLS_URL=%q\n' \
    "mysql://locker:locker-pw@127.0.0.1:$mytls_port/dblock?ssl-ca=$certs_dir/ca.pem&ssl-cert=$certs_dir/client.pem&ssl-key=$certs_dir/client.key"
  printf 'export DBLOCK_TEST_CERTS=%q\n' "$certs_dir"
}
start_mysql-tls() {
  make_certs
  (
    mytls_use
    mkdir -p "$my_dir/certs"
    cp "$certs_dir/ca.pem" "$certs_dir/server.pem" "$certs_dir/server.key" "$my_dir/certs/"
    [ "$is_root" = 0 ] || chown -R mysql: "$my_dir/certs"
    start_mysql
  )
}
stop_mysql-tls() { (mytls_use; stop_mysql); }
