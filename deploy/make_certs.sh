#!/usr/bin/env bash
# Makes what mutual TLS between a job's tasks needs, with openssl:
#   OUT/ca.pem, OUT/ca.key    a CA for the job (keep ca.key private; only
#                             ca.pem goes to the tasks)
#   OUT/cert.pem, OUT/key.pem a certificate signed by that CA, for every
#                             task, naming each HOST (IP or DNS name) plus
#                             127.0.0.1 and localhost
#   OUT/token                 a cluster token (32 random bytes, hex)
# An existing CA in OUT is reused, so certificates made later verify
# against the ca.pem the tasks already have.
#
#   deploy/make_certs.sh OUT [HOST...]
#   pstrain --tls_cert=OUT/cert.pem --tls_key=OUT/key.pem --tls_ca=OUT/ca.pem \
#           --token_file=OUT/token ...
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUT [HOST...]" >&2
  exit 2
fi
out=$1
shift
days=${PSTRAIN_CERT_DAYS:-365}
mkdir -p "$out"
umask 077
curve=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
if [[ ! -f "$out/ca.pem" || ! -f "$out/ca.key" ]]; then
  openssl req -x509 "${curve[@]}" -keyout "$out/ca.key" -out "$out/ca.pem" -days "$days" \
    -subj "/CN=pstrain job CA" 2>/dev/null
fi
san="IP:127.0.0.1,DNS:localhost"
for h in "$@"; do
  if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then san+=",IP:$h"; else san+=",DNS:$h"; fi
done
openssl req "${curve[@]}" -keyout "$out/key.pem" -out "$out/cert.csr" \
  -subj "/CN=pstrain task" -addext "subjectAltName=$san" 2>/dev/null
openssl x509 -req -in "$out/cert.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
  -CAcreateserial -out "$out/cert.pem" -days "$days" -copy_extensions copy 2>/dev/null
rm -f "$out/cert.csr"
[[ -f "$out/token" ]] || openssl rand -hex 32 >"$out/token"
chmod 644 "$out/ca.pem" "$out/cert.pem"
echo "make_certs: $out/{ca.pem,cert.pem,key.pem,token} for $san"
