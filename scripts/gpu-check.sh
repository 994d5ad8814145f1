#!/usr/bin/env bash
# The GPU check: on a machine with one CUDA GPU, in 3 to 10 minutes, run the device tests and
# the training-throughput benchmark, and write one results file, OUT/gpu-check.json (with the
# logs beside it). docs/gpu.md says how to run it and holds its last results.
#
#   scripts/gpu-check.sh [DIR]          (default DIR: gpu-check/, or $OUT/gpu-check where a job
#                                        runner collects $OUT)
#
# Where the machine has no package index, carry the wheels scripts/gpu-wheels.sh downloads
# (.whl/): they are installed into /tmp/site first. Exit status: 0 when the tests passed and
# the benchmark ran (the targets' verdicts are in the results file), else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:+$OUT/}gpu-check}
mkdir -p "$OUT"
. scripts/gpu-env.sh

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name())"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

echo "== device tests"
timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/train/test_devices.py \
  tests/train/test_synthetic_training.py --junitxml="$OUT/tests.xml" > "$OUT/tests.log" 2>&1
tests_rc=$?
tail -3 "$OUT/tests.log"

echo "== training throughput (fp32 with the losses and a profile, bf16, fp32 with 4 loader workers)"
timeout 200 "$PY" benchmarks/train_throughput.py --device cuda --steps 20 --profile \
  --json "$OUT/throughput-fp32.json" > "$OUT/throughput.log" 2>&1
bench_rc=$?
timeout 90 "$PY" benchmarks/train_throughput.py --device cuda --precision bf16 --steps 20 \
  --no-losses --json "$OUT/throughput-bf16.json" >> "$OUT/throughput.log" 2>&1
timeout 90 "$PY" benchmarks/train_throughput.py --device cuda --steps 20 --loader-workers 4 \
  --no-losses --json "$OUT/throughput-workers.json" >> "$OUT/throughput.log" 2>&1
grep -v '"top"' "$OUT/throughput.log" | tail -25

"$PY" - "$OUT" "$tests_rc" "$bench_rc" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path

out, tests_rc, bench_rc = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
result = {"environment": (out / "environment.txt").read_text().strip().splitlines(),
          "tests": {"exit_status": tests_rc}, "benchmark_exit_status": bench_rc}
try:
    suite = ET.parse(out / "tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    result["tests"].update({k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors",
                                                              "skipped")})
except (OSError, ET.ParseError) as e:
    result["tests"]["unreadable"] = str(e)
cpu = json.loads(Path("benchmarks/train_throughput-cpu.json").read_text())
cpu_rate = {r["paper"]: r["audio_s_per_s"] for r in cpu["throughput"]}
for kind in ("fp32", "bf16", "workers"):
    path = out / f"throughput-{kind}.json"
    if not path.is_file():
        continue
    run = json.loads(path.read_text())
    for row in run["throughput"]:
        base = cpu_rate.get(row["paper"])
        if base:  # the steady state (the trainer's clock between updates) where it is known
            rate = row.get("steady_audio_s_per_s", row["audio_s_per_s"])
            row["x_cpu"] = round(rate / base, 1)
            row["target_x_cpu"] = 20
            row["met"] = row["x_cpu"] >= 20
    result[f"throughput_{kind}"] = run["throughput"]
    for key in ("losses", "profile"):
        if run.get(key):
            result[key] = run[key]
result["cpu_baseline"] = {"source": "benchmarks/train_throughput-cpu.json",
                          "audio_s_per_s": cpu_rate}
(out / "gpu-check.json").write_text(json.dumps(result, indent=1) + "\n")
print(f"results: {out / 'gpu-check.json'}")
EOF
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
