#!/usr/bin/env bash
# Regenerate dgtraces/export/chakra/et_def_pb2.py from et_def.proto (needs grpcio-tools).
# The header lines keep ruff and mypy off generated code. The pinned protobuf runtime in
# pyproject's [sim] extra must be >= the "Protobuf Python Version" the file states.
set -euo pipefail
cd "$(dirname "$0")/../dgtraces/export/chakra"
python -m grpc_tools.protoc -I. --python_out=. et_def.proto
{ printf '# ruff: noqa\n# mypy: ignore-errors\n'; cat et_def_pb2.py; } > et_def_pb2.py.tmp
mv et_def_pb2.py.tmp et_def_pb2.py
