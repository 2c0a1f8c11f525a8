#!/usr/bin/env bash
# gloo-fault.sh OUTDIR [COUNT]
#
# Loops the in-process two-rank Gloo tests (TestSyncBatchNormGradient,
# TestAllReduceSumGradient) COUNT times (default 10, about 25 s on a CPU) under four variants: plain,
# without CUDA devices, on one OpenMP thread, and on two CPUs. On an H200 with
# PyTorch 2.11 they faulted in 3 of 18 runs, in the forward of the differentiable
# all-reduce (docs/RESULTS.md section 43); on libtorch 1.13 and 2.6 on a CPU, never.
# EMTORCH_BACKTRACE=1 has the shim name the faulting function (README).
#
# Run from the repository root after scripts/gpu-setup.sh, with build/tests/torch.test
# from `make gpu-bundle` and LD_LIBRARY_PATH naming the shim and libtorch, as
# gpu-acceptance.sh sets them. Each variant's log is OUTDIR/gloo-VARIANT.log.
set -u
out=${1:?usage: gloo-fault.sh OUTDIR [COUNT]}
count=${2:-10}
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/../../torch"
export EMTORCH_BACKTRACE=1
tests='Sync|AllReduceSum'
for v in plain cpu-only omp1 two-cpus; do
	case $v in
	plain) timeout 90 ../build/tests/torch.test -test.run "$tests" -test.count="$count" ;;
	cpu-only) CUDA_VISIBLE_DEVICES= timeout 90 ../build/tests/torch.test -test.run "$tests" -test.count="$count" ;;
	omp1) OMP_NUM_THREADS=1 timeout 90 ../build/tests/torch.test -test.run "$tests" -test.count="$count" ;;
	two-cpus) taskset -c 0,1 timeout 90 ../build/tests/torch.test -test.run "$tests" -test.count="$count" ;;
	esac >"$out/gloo-$v.log" 2>&1
	echo "gloo $v: exit $?"
	grep -m5 -E 'SIGSEGV|emtorch:|^(ok|FAIL|PASS)' "$out/gloo-$v.log"
done
env | grep -E 'LOCAL_WORLD_SIZE|TORCH_|OMP_' >"$out/env.txt" || true
