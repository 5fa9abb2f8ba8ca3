#!/usr/bin/env bash
# Make what deploy/nats and deploy/systemd need to run strata with TLS and
# per-role credentials: a CA, a server certificate for the NATS nodes (used
# for clients and for routes between the nodes), random passwords for the
# strata roles, and the nats-server passwords.conf that nats-N.conf includes.
#
# usage: deploy/nats/make-certs.sh OUTDIR [HOSTNAME...]
#   HOSTNAMEs go into the server certificate (default: nats-1 nats-2 nats-3
#   localhost; 127.0.0.1 is always added). Existing files in OUTDIR are kept,
#   so running it again only makes what is missing; delete a file to renew it.
#
# OUTDIR then holds:
#   certs/ca.pem certs/ca-key.pem          the CA (keep ca-key.pem offline)
#   certs/server.pem certs/server-key.pem  the NATS nodes' certificate
#   passwords.conf                         for /etc/nats/ on each node (secret)
#   strata/<role>.password                 for /etc/strata/credentials/ (secret)
#   strata/ca.pem                          for /etc/strata/ca.pem
set -euo pipefail
umask 077

if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [HOSTNAME...]" >&2
	exit 2
fi
OUT=$1
shift
HOSTS=("$@")
[ ${#HOSTS[@]} -gt 0 ] || HOSTS=(nats-1 nats-2 nats-3 localhost)
DAYS=${DAYS:-825}
ROLES=(scheduler merger windower walwriter cli-admin producer pgwire)

mkdir -p "$OUT/certs" "$OUT/strata"
cd "$OUT"

if [ ! -f certs/ca.pem ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$DAYS" \
		-subj "/CN=strata NATS CA" -keyout certs/ca-key.pem -out certs/ca.pem \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	echo "made the CA: $OUT/certs/ca.pem"
fi

if [ ! -f certs/server.pem ]; then
	san="IP:127.0.0.1"
	for h in "${HOSTS[@]}"; do san="$san,DNS:$h"; done
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${HOSTS[0]}" \
		-keyout certs/server-key.pem -out certs/server.csr 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n' "$san" >certs/server.ext
	openssl x509 -req -in certs/server.csr -CA certs/ca.pem -CAkey certs/ca-key.pem -CAcreateserial \
		-days "$DAYS" -extfile certs/server.ext -out certs/server.pem 2>/dev/null
	rm -f certs/server.csr certs/server.ext certs/ca.srl
	echo "made the server certificate for $san: $OUT/certs/server.pem"
fi
chmod 644 certs/ca.pem certs/server.pem
cp certs/ca.pem strata/ca.pem
chmod 644 strata/ca.pem

for role in "${ROLES[@]}"; do
	f=strata/$role.password
	if [ ! -s "$f" ]; then
		openssl rand -base64 32 | tr -d '\n=' | tr '+/' '-_' >"$f"
		echo >>"$f"
	fi
done

{
	echo "# Passwords of the strata roles (made by make-certs.sh; keep secret)."
	for role in "${ROLES[@]}"; do
		var=$(echo "$role" | tr 'a-z-' 'A-Z_')_PASSWORD
		printf '%s: "%s"\n' "$var" "$(head -n1 "strata/$role.password")"
	done
} >passwords.conf
echo "made passwords.conf and strata/<role>.password for: ${ROLES[*]}"
