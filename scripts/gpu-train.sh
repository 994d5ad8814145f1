#!/usr/bin/env bash
# Train one model of a recipe on a GPU machine that cannot build the corpus (no espeak-ng or
# festival there), for a fixed time, and leave what resumes it where a job runner collects it.
# docs/gpu.md ("Training a shipped model on a GPU") says how the pieces fit.
#
#   scripts/gpu-train.sh PAPER MODEL SCALE PACK SECONDS [-- EXTRA TRAIN ARGS]
#
#   PACK     the corpus as `speechlab data pack` wrote it (carried with the checkout)
#   SECONDS  training time; then SIGTERM to the trainer alone (its loader workers are shut down
#            by it), which checkpoints the update it stands at
#
# Writes into ${OUT}/gpu-train (or gpu-train/): the latest checkpoint and best.pt in parts of at
# most 15 MiB (best.pt without its optimizer state, which nothing reads back), log.jsonl,
# train.log and collected.json (steps, SHA-256 of each whole file). Back where the run lives,
# `python scripts/gpu_train_parts.py restore DIR RUN/models/MODEL` puts them together; the same
# `speechlab reproduce` or `speechlab train` command then resumes from them. A second call on
# the same machine continues the same run (the run directory is /tmp/gpu-run).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 5 ]; then sed -n 2,18p "$0"; exit 2; fi
PAPER=$1 MODEL=$2 SCALE=$3 PACK=$4 SECONDS_=$5
shift 5; [ "${1:-}" = "--" ] && shift
DEST=${OUT:+$OUT/}gpu-train
RUN=${GPU_RUN:-/tmp/gpu-run}
DEVICE=${DEVICE:-cuda}
mkdir -p "$DEST" "$RUN"
. scripts/gpu-env.sh
if [ ! -f "$RUN/corpus/corpus.json" ]; then
  "$PY" -m speechlab data unpack "$PACK" --out "$RUN/corpus" --no-progress || exit 1
fi
timeout --foreground -s TERM -k 90 "$SECONDS_" "$PY" -m speechlab train "$PAPER" "$MODEL" --scale "$SCALE" \
  --out "$RUN" --corpus "$RUN/corpus" --device "$DEVICE" "$@" > "$DEST/train.log" 2>&1
rc=$?
tail -5 "$DEST/train.log"
"$PY" scripts/gpu_train_parts.py collect "$RUN/models/$MODEL" "$DEST" || exit 1
# 124: stopped at SECONDS, as asked (the checkpoint is written on the way out)
[ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]
