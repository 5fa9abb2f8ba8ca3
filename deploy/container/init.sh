#!/bin/sh
# Run once before NATS starts (compose service "init"): make a password per
# role in the shared data directory (kept across runs) and the nats-server
# configuration with those users and their permissions. The services find
# their own password in the same directory. It also makes the bucket's
# access key (compose service "s3"), kept across runs too.
set -eu
data=${STRATA_DATA:-/var/lib/strata/data}
conf=${STRATA_NATS_CONF:-/var/lib/strata/nats-auth.conf}
umask 077
strata auth init --data "$data"
strata auth server-config --data "$data" >"$conf.tmp"
# The file holds every password: it stays 0600 (nats-server, root in its
# image, reads it).
mv "$conf.tmp" "$conf"
echo "nats-server configuration in $conf"

# The bucket's access key, made on the first run: an AWS credentials file
# the strata services read (AWS_SHARED_CREDENTIALS_FILE), 0600, and the
# S3 server's identity configuration (SeaweedFS -s3.config). The server's
# image runs as its own user (seaweed, uid 1000), so that file is 0644: the
# volume is mounted only into this stack's containers.
s3=${STRATA_S3_DIR:-/var/lib/strata/s3}
mkdir -p "$s3"
if [ ! -s "$s3/credentials" ] || [ ! -s "$s3/s3.json" ]; then
	key=strata$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '{"identities": [{"name": "strata", "credentials": [{"accessKey": "%s", "secretKey": "%s"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}\n' \
		"$key" "$secret" >"$s3/s3.json.tmp"
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$key" "$secret" >"$s3/credentials.tmp"
	chmod 0755 "$s3"
	chmod 0644 "$s3/s3.json.tmp"
	mv "$s3/s3.json.tmp" "$s3/s3.json"
	mv "$s3/credentials.tmp" "$s3/credentials"
	echo "bucket credentials in $s3"
fi
