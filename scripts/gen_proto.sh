#!/usr/bin/env bash
# Regenerate the Python code of the wire API (package fairshare.v1) from proto/fairshare/v1/*.proto.
#
# Usage: scripts/gen_proto.sh [OUT_DIR]
#   OUT_DIR defaults to proto/ (regenerate in place); files land in OUT_DIR/fairshare/v1/.
#   Stale generated files (of deleted .proto files) in OUT_DIR/fairshare/v1/ are removed first.
#
# Output per foo.proto: foo_pb2.py, foo_pb2_grpc.py (grpcio-tools) and foo_pb2.pyi,
# foo_pb2_grpc.pyi (mypy-protobuf). protoc runs with `-I proto`, so generated imports read
# `from fairshare.v1 import foo_pb2`. Generated files are committed and never edited by hand.
#
# The output depends on the generator versions, so they are pinned here and checked:
#   grpcio-tools == 1.85.1 (bundles protoc 35.1 / Python gencode 7.35.1), mypy-protobuf == 5.1.0
# Install them with:  pip install grpcio-tools==1.85.1 mypy-protobuf==5.1.0
# Python: $PYTHON if set, else ./.venv/bin/python if present, else python3.
set -euo pipefail
export LC_ALL=C

readonly GRPCIO_TOOLS_VERSION=1.85.1
readonly MYPY_PROTOBUF_VERSION=5.1.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/proto}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"

if [[ -z ${PYTHON:-} ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi

# Fail clearly when the generators are missing or of another version.
"$PYTHON" - "$GRPCIO_TOOLS_VERSION" "$MYPY_PROTOBUF_VERSION" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

wanted = {"grpcio-tools": sys.argv[1], "mypy-protobuf": sys.argv[2]}
bad = []
for dist, pin in wanted.items():
    try:
        have = version(dist)
    except PackageNotFoundError:
        have = "not installed"
    if have != pin:
        bad.append(f"  {dist}: need {pin}, found {have}")
if bad:
    pins = " ".join(f"{d}=={p}" for d, p in wanted.items())
    sys.exit(
        "gen_proto.sh: generator versions differ from the pins (output would differ):\n"
        + "\n".join(bad)
        + f"\n  fix: {sys.executable} -m pip install {pins}"
    )
PY

SCRIPTS_DIR=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
for plugin in protoc-gen-mypy protoc-gen-mypy_grpc; do
    if [[ ! -x $SCRIPTS_DIR/$plugin ]]; then
        echo "gen_proto.sh: $SCRIPTS_DIR/$plugin not found (pip install mypy-protobuf==$MYPY_PROTOBUF_VERSION)" >&2
        exit 1
    fi
done

PROTOS=()
for f in proto/fairshare/v1/*.proto; do PROTOS+=("$f"); done
if [[ ! -e ${PROTOS[0]} ]]; then
    echo "gen_proto.sh: no .proto files under proto/fairshare/v1" >&2
    exit 1
fi

mkdir -p "$OUT/fairshare/v1"
find "$OUT/fairshare/v1" -maxdepth 1 -type f \
    \( -name '*_pb2.py' -o -name '*_pb2_grpc.py' -o -name '*_pb2.pyi' -o -name '*_pb2_grpc.pyi' \) \
    -delete

"$PYTHON" -m grpc_tools.protoc \
    -I proto \
    --plugin=protoc-gen-mypy="$SCRIPTS_DIR/protoc-gen-mypy" \
    --plugin=protoc-gen-mypy_grpc="$SCRIPTS_DIR/protoc-gen-mypy_grpc" \
    --python_out="$OUT" \
    --grpc_python_out="$OUT" \
    --mypy_out=quiet:"$OUT" \
    --mypy_grpc_out=quiet:"$OUT" \
    "${PROTOS[@]}"

echo "gen_proto.sh: generated ${#PROTOS[@]} proto files into $OUT/fairshare/v1"
