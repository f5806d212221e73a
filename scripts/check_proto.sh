#!/usr/bin/env bash
# Check the wire API: buf lint + buf format on proto/, and that the committed generated code in
# proto/fairshare/v1/ is exactly what scripts/gen_proto.sh produces from the .proto files.
# Exit 0 when clean, 1 (with a diff) when the generated code drifted, buf's code on lint errors.
#
# Needs: node/npx (buf is fetched from npm at the pinned version below; set BUF to a buf
# executable to use that instead), and a Python with the generator pins of gen_proto.sh:
#   pip install grpcio-tools==1.85.1 mypy-protobuf==5.1.0
set -euo pipefail
export LC_ALL=C

readonly BUF_VERSION=1.75.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if [[ -n ${BUF:-} ]]; then
    BUF_CMD=("$BUF")
else
    BUF_CMD=(env npm_config_loglevel=error npx --yes "@bufbuild/buf@$BUF_VERSION")
fi

echo "check_proto.sh: buf lint"
"${BUF_CMD[@]}" lint proto
echo "check_proto.sh: buf format"
"${BUF_CMD[@]}" format --diff --exit-code proto

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "check_proto.sh: regenerating into a temporary directory"
"$ROOT/scripts/gen_proto.sh" "$TMP/fresh" >/dev/null

mkdir -p "$TMP/committed/fairshare/v1"
find proto/fairshare/v1 -maxdepth 1 -type f \
    \( -name '*_pb2.py' -o -name '*_pb2_grpc.py' -o -name '*_pb2.pyi' -o -name '*_pb2_grpc.pyi' \) \
    -exec cp {} "$TMP/committed/fairshare/v1/" \;

if ! (cd "$TMP" && diff -ru committed fresh); then
    echo "check_proto.sh: generated code in proto/fairshare/v1 differs from the .proto files" >&2
    echo "  (committed = the files in the repository, fresh = generated now)" >&2
    echo "  fix: run scripts/gen_proto.sh and commit the result; never edit generated files" >&2
    exit 1
fi
echo "check_proto.sh: OK (lint clean, generated code up to date)"
