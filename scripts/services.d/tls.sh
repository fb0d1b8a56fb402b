# shellcheck shell=bash
# The test certificates of the TLS servers, made once with openssl into $state/certs (0700):
#   ca.pem        the test CA, which signed the two below
#   server.pem    server.key: for 127.0.0.1 and localhost (subjectAltName), server and client use
#   client.pem    client.key: CN=dblock, client use (etcd's auth takes the CN as the user)
#   other-ca.pem  a second CA that signed nothing: a client trusting it must refuse our servers
# ECDSA P-256 keys, valid 10 years. Remove the directory to make new ones.

certs_dir="$state/certs"

make_certs() {
  [ -s "$certs_dir/client.key" ] && return 0
  command -v openssl >/dev/null || die "tls: no openssl (install it with scripts/deps test)"
  local tmp
  mkdir -p "$state"
  tmp=$(mktemp -d "$state/.certs.XXXXXX")
  (
    cd "$tmp"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    ca() {  # ca NAME CN
      key "$1.key"
      openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 -out "$1.pem" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    }
    leaf() {  # leaf NAME CN EXTENSIONS: signed by ca
      key "$1.key"
      openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    }
    ca ca "dblock test CA"
    ca other-ca "dblock other CA"
    leaf server 127.0.0.1 $'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth'
    leaf client dblock 'extendedKeyUsage=clientAuth'
    rm -f ./*.csr ./*.ext ./*.srl other-ca.key
    chmod 600 ./*.key
  ) || { rm -rf "$tmp"; die "tls: openssl could not make the test certificates"; }
  chmod 700 "$tmp"
  # Made aside and moved in whole: a concurrent start sees all of them or none.
  mv -T "$tmp" "$certs_dir" 2>/dev/null || rm -rf "$tmp"
  note "tls: test certificates in $certs_dir"
}
