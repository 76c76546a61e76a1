#!/usr/bin/env bash
# One prepared device call on a TPU host (the device tool: run with carry [".tpu", "maxkernel-bench-offline"]),
# writing every figure under $OUT as it goes so a call cut off at its limit still returns them:
#   1. maxkernel doctor (the chip as its runtime reports it, the sandbox)
#   2. make test-tpu (detection; measured GEMM, row-wise and flash-attention verdicts against a wall clock; the
#      unwritten-scratch kernel refused; calibrate end to end), figures in $OUT/tpu-figures.jsonl
#   3. with STEP=bench: the measured bench of the offline JaxBench kernels, resumed from
#      benchmarks/results/measured-bench.jsonl (copy $OUT/measured-bench.jsonl back there between calls)
# Usage there: tools/tpu/device_check.sh [tests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
STEP=${1:-tests}
export PYTHONUNBUFFERED=1 MAXKERNEL_HOME="$OUT/home" MAXKERNEL_TPU_FIGURES="$OUT/tpu-figures.jsonl"
run=tools/tpu/run.sh
{ date -u; uname -a; python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)'; } \
  > "$OUT/host.txt" 2>&1
$run maxkernel doctor --json > "$OUT/doctor.json" 2> "$OUT/doctor.err"
if [ "$STEP" = tests ] || [ "$STEP" = all ]; then
  $run make test-tpu PYTHON_TPU=python3 PYTEST_TPU_ARGS="-x tests/tpu" 2>&1 | tee "$OUT/test-tpu.log"
fi
if [ "$STEP" = bench ] || [ "$STEP" = all ]; then
  mkdir -p benchmarks/results
  cp benchmarks/results/measured-bench.jsonl "$OUT/measured-bench.jsonl" 2>/dev/null || true
  $run python3 benchmarks/measured_bench.py run --kernels maxkernel-bench-offline/tasks \
    --results "$OUT/measured-bench.jsonl" --stop-after "${STOP_AFTER:-420}" 2>&1 | tee "$OUT/bench.log"
fi
echo "figures in $OUT"
