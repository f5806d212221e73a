#!/usr/bin/env bash
# Build localhost/fairshare:VERSION (and :latest) from this checkout: the wheels of fairshare and
# its dependencies are made on the host with pip (whatever index pip is set up with), then the
# image installs them without network (deploy/container/Containerfile).
# Usage: deploy/container/build.sh [--build-arg BASE=...]    (ENGINE=docker works too)
set -euo pipefail
read -r -a ENGINE <<< "${ENGINE:-podman}"  # e.g. ENGINE="podman --runtime runc"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
CONTEXT=$(mktemp -d)
trap 'rm -rf "$CONTEXT"' EXIT

VERSION=$(cd "$ROOT" && "$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
"$PYTHON" -m pip wheel --quiet --wheel-dir "$CONTEXT/wheels" "$ROOT"
cp "$ROOT/deploy/container/Containerfile" "$CONTEXT/"
"${ENGINE[@]}" build "$@" --tag "localhost/fairshare:$VERSION" --tag localhost/fairshare:latest \
    --file "$CONTEXT/Containerfile" "$CONTEXT"
