#!/usr/bin/env bash
# make-certs.sh DIR [HOST ...]: a private certificate authority and one
# certificate each for the Dask scheduler, the workers and the clients
# (mutual TLS: every side shows a certificate signed by the CA).
#
#   DIR/ca.pem                          the CA certificate (give it to every side)
#   DIR/scheduler.pem, scheduler-key.pem
#   DIR/worker.pem,    worker-key.pem
#   DIR/client.pem,    client-key.pem   (keys: mode 600)
#   CA_DIR/ca-key.pem                   the CA key, NOT in DIR: whoever holds it can
#                                       mint certificates the cluster trusts; keep it
#                                       off the cluster (CA_DIR: default DIR-ca, mode 700)
#
# HOST: names or IP addresses put in the certificates' subjectAltName
# (localhost and 127.0.0.1 are always there; Dask itself does not check host
# names, it checks that the peer's certificate is signed by the CA).
# DAYS (default 365) sets the lifetime.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: make-certs.sh DIR [HOST ...]" >&2; exit 2; }
command -v openssl >/dev/null || { echo "make-certs.sh: openssl not found" >&2; exit 2; }
DIR="$1"; shift
DAYS="${DAYS:-365}"
CA_DIR="${CA_DIR:-${DIR%/}-ca}"
umask 077
mkdir -p "$DIR" "$CA_DIR"
CA_DIR="$(cd "$CA_DIR" && pwd)"
cd "$DIR"
[ "$CA_DIR" != "$(pwd)" ] || { echo "make-certs.sh: CA_DIR must not be DIR" >&2; exit 2; }
CA_KEY="$CA_DIR/ca-key.pem"

san="DNS:localhost,IP:127.0.0.1"
for h in "$@"; do
    if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san="$san,IP:$h"; else san="$san,DNS:$h"; fi
done

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$DAYS" \
    -keyout "$CA_KEY" -out ca.pem -subj "/CN=emst-dask CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null

cat > leaf.ext <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
EXT

for role in scheduler worker client; do
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$role-key.pem" -out "$role.csr" \
        -subj "/CN=emst-dask $role" 2>/dev/null
    openssl x509 -req -sha256 -days "$DAYS" -in "$role.csr" -CA ca.pem -CAkey "$CA_KEY" \
        -CAcreateserial -out "$role.pem" -extfile leaf.ext 2>/dev/null
    openssl verify -CAfile ca.pem "$role.pem" >/dev/null
    rm -f "$role.csr"
done
rm -f leaf.ext ca.srl
chmod 644 ca.pem scheduler.pem worker.pem client.pem
echo "certificates in $(pwd): ca.pem, {scheduler,worker,client}.pem and -key.pem"
echo "CA key in $CA_KEY: keep it off the cluster"
