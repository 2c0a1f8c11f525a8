#!/usr/bin/env bash
# gloo-fault.sh OUTDIR [COUNT [VARIANTS]]
#
# Loops the in-process two-rank Gloo tests (TestSyncBatchNormGradient,
# TestAllReduceSumGradient) COUNT times (default 10, about 25 s on a CPU), each
# variant for at most 60 s, under variants (VARIANTS, comma-separated: all unless
# given) that tell the likely causes apart:
#   plain      as the acceptance tests run them (since section 51 with the flight
#              recorder off: the variants but fr-on no longer test section 43's setting);
#   cpu-only   no CUDA device, so no autograd device thread (a CUDA build's own work);
#   omp1       one OpenMP thread;   two-cpus   on two CPUs;
#   perturb    freed memory filled with 0xa5 (MALLOC_PERTURB_): a fault address of
#              0xa5a5… means a use after free, not a null pointer;
#   shuffled   with TestGroupCollectives and TestGroupErrors (no autograd), in one
#              random order that the log names: a fault in those means the autograd
#              path is not what matters;
#   fresh      TestAllReduceSumGradient alone, a new process each time: is the first
#              group in a process ever hit?
#   fr-on      shuffled, with c10d's flight recorder on (TORCH_FR_BUFFER_SIZE=2000,
#              2.11's default), which the tests otherwise turn off
#              (torch.AllowInProcessRanks): the cause found in section 51.
# On an H200 with PyTorch 2.11 they faulted in 3 of 18 runs, in the forward of the
# differentiable all-reduce (docs/RESULTS.md section 43); on libtorch 1.13 and 2.6 on
# a CPU, never. Section 51 caught one in ProcessGroupGloo::enqueue, likely in the flight
# recorder's process-wide map, which two in-process groups may write at once. EMTORCH_BACKTRACE=1 has the shim name the faulting thread and function
# (README).
#
# Run from the repository root after scripts/gpu-setup.sh, with build/tests/torch.test
# from `make gpu-bundle` and LD_LIBRARY_PATH naming the shim and libtorch, as
# gpu-acceptance.sh sets them (in its own process only: export them again here). All
# goes to OUTDIR/gloo-fault.log, each variant under a line "== VARIANT", and the
# environment's libtorch settings to OUTDIR/env.txt: two files, as a device machine
# returns only a few.
set -u
out=${1:?usage: gloo-fault.sh OUTDIR [COUNT [VARIANTS]]}
count=${2:-10}
variants=${3:-plain,cpu-only,omp1,two-cpus,perturb,shuffled,fresh,fr-on}
for v in ${variants//,/ }; do
	case $v in plain | cpu-only | omp1 | two-cpus | perturb | shuffled | fresh | fr-on) ;;
	*) echo "gloo-fault.sh: no variant $v" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/../../torch"
env | grep -E 'LD_LIBRARY_PATH|LOCAL_WORLD_SIZE|TORCH_|OMP_|CUDA_' >"$out/env.txt"
t=../build/tests/torch.test
# A binary that cannot load the shim would fail every variant the same way.
if ! $t -test.list '^TestAllReduceSumGradient$' >"$out/gloo-fault.log" 2>&1; then
	echo "gloo-fault.sh: $t does not start (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}):" >&2
	cat "$out/gloo-fault.log" >&2
	exit 1
fi
export EMTORCH_BACKTRACE=1
tests='Sync|AllReduceSum'
one=$(mktemp)
trap 'rm -f "$one"' EXIT
for v in ${variants//,/ }; do
	case $v in
	plain) timeout 60 $t -test.run "$tests" -test.count="$count" ;;
	cpu-only) CUDA_VISIBLE_DEVICES= timeout 60 $t -test.run "$tests" -test.count="$count" ;;
	omp1) OMP_NUM_THREADS=1 timeout 60 $t -test.run "$tests" -test.count="$count" ;;
	two-cpus) taskset -c 0,1 timeout 60 $t -test.run "$tests" -test.count="$count" ;;
	perturb) MALLOC_PERTURB_=165 timeout 60 $t -test.run "$tests" -test.count="$count" ;;
	shuffled) timeout 60 $t -test.run "Group|$tests" -test.shuffle=on -test.count="$count" ;;
	fr-on) TORCH_FR_BUFFER_SIZE=2000 timeout 60 $t -test.run "Group|$tests" -test.shuffle=on -test.count="$count" ;;
	fresh)
		# No process starts after 60 s; each prints its own PASS or FAIL.
		end=$((SECONDS + 60))
		for _ in $(seq "$count"); do
			[ $SECONDS -lt $end ] || break
			timeout 20 $t -test.run '^TestAllReduceSumGradient$' -test.count=1 || echo "fresh: exit $?"
		done
		;;
	esac >"$one" 2>&1
	status="exit $?"
	[ $v != fresh ] || status="$(grep -c '^fresh: exit' "$one") of $(grep -c -E '^PASS$|^fresh: exit' "$one") processes failed"
	echo "gloo $v: $status, $(grep -c -E 'SIGSEGV|signal 11' "$one") fault line(s), $(grep -c -E '^(--- )?FAIL' "$one") FAIL line(s)"
	grep -m5 -E 'SIGSEGV|emtorch:|fresh: exit|-test.shuffle' "$one"
	{ echo "== $v"; cat "$one"; } >>"$out/gloo-fault.log"
done
