#!/usr/bin/env bash
# Make the base images locally from Debian's packages (no image registry is needed):
#   localhost/fairshare-base:bookworm        python3, python3-venv, ca-certificates, tini
#   localhost/fairshare-prometheus:bookworm  Debian's prometheus package on the same base
# Needs (Debian): podman mmdebstrap. Run as root (podman import of a root filesystem).
set -euo pipefail
read -r -a ENGINE <<< "${ENGINE:-podman}"  # e.g. ENGINE="podman --runtime runc"
SUITE=${SUITE:-bookworm}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates,tini \
    "$SUITE" "$TMP/base.tar"
"${ENGINE[@]}" import --change 'CMD ["/bin/bash"]' "$TMP/base.tar" "localhost/fairshare-base:$SUITE"

mmdebstrap --variant=minbase --include=prometheus,ca-certificates \
    "$SUITE" "$TMP/prometheus.tar"
"${ENGINE[@]}" import \
    --change 'USER nobody' \
    --change 'ENTRYPOINT ["/usr/bin/prometheus"]' \
    --change 'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]' \
    "$TMP/prometheus.tar" "localhost/fairshare-prometheus:$SUITE"
"${ENGINE[@]}" images --filter reference='localhost/fairshare-*'
