#!/usr/bin/env bash
# The GPU items of issue 11 in one command, on a machine with a CUDA device (not a test; CI has no GPU):
#
#   bash benchmarks/gpu_suite.sh [OUT_DIR] [--skip-table1]
#
# from the repository root, in an environment where `pip install -e '.[test]'` has been done with a
# CUDA build of torch.  Writes into OUT_DIR (default results/gpu):
#   device.txt          nvidia-smi, torch and CUDA versions, date
#   cuda_tests.txt      pytest -m cuda (tests/test_cuda.py, the CUDA tests of tests/test_enumeration.py, ...)
#   bench_ais.json/txt  AIS on a 784x500 RBM and a 784-500-1000 DBM, 500 chains: sweeps/s and the
#                       fraction of the same-run float32 matmul rate (target >= 0.70 on an H100)
#   bench_exact.json/txt  exact log Z of a 784x25 RBM (2^25 states): float64 and mixed precision
#   raise_table1/       the workflow on config/raise_table1.yaml (the five MNIST RBMs, AIS and RAISE
#                       up to K = 100,000 at the paper's chains) with device=cuda; its wall time in
#                       raise_table1.time.txt and the overhead figures in raise_table1.overhead.txt
# Every step runs even when an earlier one fails; the exit status is the number of failed steps.
set -uo pipefail

OUT=${1:-results/gpu}
SKIP_TABLE1=0
for a in "$@"; do [[ "$a" == "--skip-table1" ]] && SKIP_TABLE1=1; done
[[ "$OUT" == "--skip-table1" ]] && OUT=results/gpu
mkdir -p "$OUT"
export LOGZBENCH_DATA_MIRROR=${LOGZBENCH_DATA_MIRROR:-$(cd .. && pwd)/shared/data}
failed=0
step() {  # step NAME COMMAND...: run, tee into OUT/NAME.txt, count failures
    local name=$1; shift
    echo "== $name: $*"
    if ! "$@" 2>&1 | tee "$OUT/$name.txt"; then failed=$((failed + 1)); echo "== $name FAILED"; fi
}

{
    date -u +"%Y-%m-%d %H:%M UTC"
    nvidia-smi || true
    python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
    nproc
} > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || { echo "no CUDA device: nothing to measure"; exit 1; }

step cuda_tests python -m pytest -q -p no:cacheprovider -m cuda tests
step bench_ais python benchmarks/bench_ais.py --device cuda --json "$OUT/bench_ais.json"
step bench_exact python benchmarks/bench_exact.py --device cuda --bits 25 --json "$OUT/bench_exact.json"
if [[ $SKIP_TABLE1 == 0 ]]; then
    # RAISE Table 1 end to end on the GPU; benchmarks/workflow_overhead.py times the snakemake command
    # and reads the run's own records (training, estimation seconds).
    step raise_table1.overhead python benchmarks/workflow_overhead.py --configfile config/raise_table1.yaml \
        --cores "$(nproc)" --directory "$OUT/raise_table1" --json "$OUT/raise_table1.overhead.json" \
        -- --config device=cuda
fi
echo "== $failed step(s) failed; figures in $OUT"
exit $failed
