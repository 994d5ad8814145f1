#!/usr/bin/env bash
# Fine-tuning the scan's best pre-trained wav2vec 2.0 model (docs/local-attention.md, "LMSAB
# with three seeds") as Orig and LMSAB variants, once per seed: one `speechlab reproduce
# local-attention` run directory per seed under $OUT, each starting from the same pre-trained
# model (hard links to $PRETRAINED, so the run only fine-tunes and decodes). Seeds run one
# after the other, niced, one thread; re-running resumes (a finished seed has DONE).
# The table over the seeds: python docs/scripts/lmsab-seeds-table.py $OUT
set -euo pipefail
CODE=${CODE:-$(cd "$(dirname "$0")/../.." && pwd)}   # a checkout; a frozen one for long runs
SCAN=${SCAN:-exp/w2v-scan}
POINT=${POINT:-tiny-fbank-lr-32k}
OUT=${OUT:-exp/lmsab-seeds}
PY=${PY:-python}
SEEDS=${SEEDS:-"0 1 2"}
export PYTHONPATH=$CODE/src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 SPEECHLAB_PROGRESS=0
PRETRAINED=$SCAN/$POINT/models/pretrained
[ -e "$SCAN/$POINT/DONE" ] || { echo "$POINT has not finished pre-training"; exit 2; }
# The point's own pre-training settings (so the run's plan names the same pre-trained model),
# the small recipe's five models (the diagnosis-driven ones fall back to the paper's lists
# scaled to 6 blocks when it finds no vertical or diagonal block), the LM search at beam 50.
SETS=(pretrain.optim.lr=0.002 pretrain.max_steps=32000 pretrain.schedule.warmup_steps=3200
      "variants={Orig: '', L_B6-11: 'diagnosis:vertical|4-5', L_B2-12: '2-6', L_B1-12: '1-6', L_B2-5: 'diagnosis:diagonal|2-3'}"
      "beams=[50]" "lm_weights=[0.3, 0.6, 1.0]")
# DONE holds the settings a seed finished with: with others (e.g. more variants) it runs
# again, training only the models it lacks and decoding again (seconds per model).
KEY="${SETS[*]}"
mkdir -p "$OUT"
for seed in $SEEDS; do
  dir=$OUT/s$seed
  [ "$(cat "$dir/DONE" 2>/dev/null)" = "$KEY" ] && { echo "seed $seed: done"; continue; }
  mkdir -p "$dir/models"
  [ -e "$dir/models/pretrained" ] || cp -al "$PRETRAINED" "$dir/models/pretrained"
  echo "$(date -u +%FT%TZ) seed $seed: fine-tuning and decoding" | tee -a "$OUT/seeds.log"
  nice -n 5 "$PY" -m speechlab reproduce local-attention --scale scan --out "$dir" \
    --corpus "$SCAN/tiny-fbank/corpus" --jobs 1 --set "${SETS[@]}" "seed=$seed" \
    >>"$OUT/s$seed.log" 2>&1
  printf '%s' "$KEY" > "$dir/DONE"
  echo "$(date -u +%FT%TZ) seed $seed: done" | tee -a "$OUT/seeds.log"
done
