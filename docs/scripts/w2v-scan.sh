#!/usr/bin/env bash
# The wav2vec 2.0 pre-training scan (docs/local-attention.md, "Pre-training scan"; the grid's
# base is src/speechlab/recipes/local-attention/scan.yaml). Points run one after the other,
# niced, one thread each, every point in its own directory under $OUT. Re-running resumes: a
# finished point (DONE) is skipped, an interrupted one resumes from its last checkpoint. Each
# point takes a lock, so a second copy of the script started beside the first takes the next
# free point (two copies: two cores). POINTS="a b" runs only the points named.
set -euo pipefail
CODE=${CODE:-$(cd "$(dirname "$0")/../.." && pwd)}   # a checkout; a frozen one for long runs
OUT=${OUT:-exp/w2v-scan}
PY=${PY:-python}
export PYTHONPATH=$CODE/src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p "$OUT"

# name|--set overrides on top of scan.yaml
GRID=(
  "tiny-fbank|"
  "wide-fbank|model=wide"
  "tiny-conv|front_end=conv"
  "tiny-fbank-16k|pretrain.max_steps=16000 pretrain.schedule.warmup_steps=1600"
  # Base's attention-logit scale at the start (init std 0.02 * sqrt(768 / dim), see
  # Wav2Vec2Config.init_std): at 0.02 the narrow models start with uniform attention.
  "tiny-fbank-init|init_std=0.0693"
  "wide-fbank-init|model=wide init_std=0.049"
  # Four times the learning rate: the six points above learnt slowly (dev accuracy 10-18%
  # after 8k updates of batches of 32 s of audio).
  "tiny-fbank-lr|pretrain.optim.lr=0.002"
  # ... whose attention moved off uniform a little (entropy 0.98, band 0.096) until its rate
  # decayed: the same rate for four times the updates.
  "tiny-fbank-lr-32k|pretrain.optim.lr=0.002 pretrain.max_steps=32000 pretrain.schedule.warmup_steps=3200"
  # ... whose drift had not stopped at 32k: the same on the wide model
  "wide-fbank-lr-32k|model=wide pretrain.optim.lr=0.002 pretrain.max_steps=32000 pretrain.schedule.warmup_steps=3200"
)
CORPUS=$OUT/tiny-fbank/corpus   # built by the first point, shared by the others

for point in "${GRID[@]}"; do
  name=${point%%|*}; sets=${point#*|}; dir=$OUT/$name
  if [ -n "${POINTS:-}" ] && [[ " $POINTS " != *" $name "* ]]; then continue; fi
  [ -e "$dir/DONE" ] && { echo "$name: done"; continue; }
  if [ "$name" != tiny-fbank ] && [ ! -e "$OUT/tiny-fbank/DONE" ] && [ ! -e "$CORPUS/corpus.json" ]; then
    echo "$name: waits for tiny-fbank's corpus"; continue
  fi
  exec 9>"$dir.lock"
  flock -n 9 || { echo "$name: another copy runs it"; continue; }
  args=(--scale scan --out "$dir")
  [ "$name" != tiny-fbank ] && args+=(--corpus "$CORPUS")
  [ -n "$sets" ] && args+=(--set $sets)
  echo "$(date -u +%FT%TZ) $name: pre-training" | tee -a "$OUT/scan.log"
  nice -n 15 "$PY" -m speechlab train local-attention pretrained "${args[@]}" >>"$OUT/$name.log" 2>&1
  echo "$(date -u +%FT%TZ) $name: attention over training" | tee -a "$OUT/scan.log"
  nice -n 15 "$PY" -m speechlab diagnose attention-over-training "$dir/models/pretrained" \
    --cuts "$CORPUS/dev_cuts.jsonl.gz" --out "$dir/over-training" --overwrite >>"$OUT/$name.log" 2>&1
  touch "$dir/DONE"
  echo "$(date -u +%FT%TZ) $name: done" | tee -a "$OUT/scan.log"
  exec 9>&-
done
