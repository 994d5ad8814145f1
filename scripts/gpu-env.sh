# Sourced by the GPU scripts (gpu-check.sh, gpu-train.sh), from the checkout's root: where the
# machine has no package index and the checkout carries .whl/ (scripts/gpu-wheels.sh), install
# those wheels into /tmp/site; then put this checkout's src/ first on the path.
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ! "$PY" -c "import lhotse, kaldifst" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
