#!/bin/sh
# Run once before NATS starts (compose service "init"): make a password per
# role in the shared data directory (kept across runs) and the nats-server
# configuration with those users and their permissions. The services find
# their own password in the same directory.
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
