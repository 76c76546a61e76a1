#!/usr/bin/env bash
# One prepared device call on a TPU host (the device tool: run with carry [".tpu", "maxkernel-bench-offline"]),
# writing every figure under $OUT as it goes so a call cut off at its limit still returns them (the device tool
# returns at most 8 files: the run store and traces stay on the host, in a scratch folder):
#   tests  maxkernel doctor, then make test-tpu (detection; measured GEMM, row-wise and flash-attention verdicts
#          against a wall clock; the unwritten-scratch kernel refused; calibrate end to end): test-tpu.log and
#          $OUT/tpu-figures.jsonl
#   cli    maxkernel eval, profile and run on the main job's task, as a user types them: cli.log
#   transfer  how fast arrays move between processes and to and from the chip: transfer.jsonl
#   bench  the measured bench of the offline JaxBench kernels, resumed from benchmarks/results/measured-bench.jsonl
#          (copy $OUT/measured-bench.jsonl back there between calls), JOBS tasks at once (3: the host's 13 cores
#          and 40 GiB; the chip's jobs wait in turn): bench.log, and jobs.log (each sandboxed job's seconds)
#   remeasure  the tasks TASKS (a glob; default the fast ones measured first) judged and timed again into a fresh
#          remeasure.jsonl, to hold a change's figures against the stored ones (within noise):
#          `python benchmarks/measured_bench.py compare` reads both
# Usage there: tools/tpu/device_check.sh STEP... (default: tests)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
scratch=$(mktemp -d)
export PYTHONUNBUFFERED=1 MAXKERNEL_HOME="$scratch/home" MAXKERNEL_TPU_FIGURES="$OUT/tpu-figures.jsonl"
run=tools/tpu/run.sh
task=tests/tpu_pallas/tasks/matmul_bias_gelu
{ date -u; uname -a; python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)'
  $run maxkernel doctor --json > "$OUT/doctor.json"; } > "$OUT/host.txt" 2>&1
for step in "${@:-tests}"; do
  case $step in
    tests) $run make test-tpu PYTHON_TPU=python3 PYTEST_TPU_ARGS="${PYTEST_TPU_ARGS:-tests/tpu}" 2>&1 | tee "$OUT/test-tpu.log" ;;
    cli) { $run maxkernel eval --task "$task" --kernel tests/tpu_pallas/kernels/honest_matmul_bias_gelu.py
           $run maxkernel profile --task "$task" --kernel tests/tpu_pallas/kernels/honest_matmul_bias_gelu.py
           $run maxkernel run --task "$task" --strategy auto --provider offline --out "$scratch/out"; } \
           2>&1 | tee "$OUT/cli.log" ;;
    transfer) $run python3 tools/tpu/probe_transfer.py 512 2>&1 | grep '"how"' | tee "$OUT/transfer.jsonl" ;;
    bench) mkdir -p benchmarks/results
           cat benchmarks/results/measured-bench.jsonl > "$OUT/measured-bench.jsonl" 2>/dev/null || true  # a copy, writable
           $run python3 benchmarks/measured_bench.py run --kernels maxkernel-bench-offline/tasks \
             --results "$OUT/measured-bench.jsonl" --stop-after "${STOP_AFTER:-420}" --jobs "${JOBS:-3}" \
             --job-log "$OUT/jobs.log" 2>&1 | tee "$OUT/bench.log" ;;
    remeasure) $run python3 benchmarks/measured_bench.py run --kernels maxkernel-bench-offline/tasks \
             --results "$OUT/remeasure.jsonl" --tasks "${TASKS:-1[1-3]p_*}" --stop-after "${STOP_AFTER:-420}" \
             --jobs "${JOBS:-2}" --job-log "$OUT/jobs.log" 2>&1 | tee "$OUT/remeasure.log" ;;
    *) echo "device_check.sh: unknown step $step (tests, cli, transfer, bench, remeasure)" >&2; exit 2 ;;
  esac
done
echo "figures in $OUT"
