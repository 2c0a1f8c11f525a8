#!/usr/bin/env bash
# gpu-acceptance.sh [--device cuda|cpu] [--quick] [--skip-tests] [--only STEPS]
#                   [--tests PKGS] [--speed-modes MODES] [--minutes M] [--fmnist DIR]
#                   [--train-seeds N] [--first-seed S] [--shim FILE] [--archive FILE]
#                   [--default-from DIR] [--default-to DIR] OUTDIR
#
# Everything that needs an NVIDIA GPU, in one command, on a machine that has PyTorch
# (CUDA), g++ and python3 but no Go and no network. Carry over the repository with the
# binaries built on a Go machine (`make gpu-bundle`: ./emclust and build/tests/*.test;
# or `make gpu-pack`: the same in build/gpu-bundle.tar.xz, a fifth of the size, with the
# Fashion-MNIST IDX files in build/fmnist and Gloo's headers in build/gloo-include,
# which the shim's Gloo backend needs and a pip PyTorch lacks). --fmnist DIR names another folder of them;
# the default is Debian's, where installed, else build/fmnist.
#
# Steps, each timed, logged to OUTDIR/acceptance.log and summed up in
# OUTDIR/results.json (a step that fails does not stop the later ones; the exit status
# is 1 if any failed):
#   shim      build libemtorch.so against this machine's PyTorch (scripts/gpu-setup.sh,
#             about a minute), or take --shim FILE, one an earlier run built
#             (OUTDIR/libemtorch.so), if FILE.torch names this machine's PyTorch
#   devices   emclust devices
#   dist      a run at world size 1 (NCCL on CUDA), and 2 ranks over Gloo on one device
#   tests     the Go test binaries with EMCLUST_TEST_DEVICE=DEVICE
#   speed     scripts/bench/compare.sh: mlp and mnist, cifar, stl10 twofold, fp32 and
#             bf16, NCHW and NHWC, against both Python peers
#   parity    scripts/parity.sh fp32 against bf16 on Fashion-MNIST
#   train     Fashion-MNIST twofold for the minutes left, --train-seeds runs side
#             by side (seeds S..S+N-1, S from --first-seed, default 1; N default 4 on
#             CUDA, where four runs do about 2.5 times the work of one, 1 on the CPU, 2
#             with --quick), with epoch times, the fraction of the GPU's dense peak,
#             and each run's last and chosen epoch; of two runs or more, OUTDIR/trials.md
#             replays train --trial-epochs on them (scripts/study/trial_replay.py)
#   default   only where --only names it: one Fashion-MNIST run at emclust train's
#             defaults (4 trials of 10 epochs, the one kept to 250: about 18 minutes
#             of an H200, longer than a lend), for the minutes left. It goes on over
#             lends: --default-to DIR receives the run folder as xz parts of 15 MiB
#             (default-run.tar.xz.part-NN; a device machine returns files of 16 MiB
#             at most) listed with their SHA-256 in default-run.sha256, and the next
#             lend carries them and names them with --default-from DIR, which
#             resumes the run. DIR lies outside OUTDIR; OUTDIR/default-run keeps the
#             run's metrics for the archive.
#
# --archive FILE packs OUTDIR as one tar.xz when the script ends, also early, without
# model files (*.safetensors) and the shim: a device machine returns only a few
# files, and eight runs' metrics and logs are dozens. FILE must lie outside OUTDIR.
#
# --only dist,tests (say) runs those steps and records the others as skipped (the shim
# is always built). Only the tests step needs build/tests: make gpu-pack-lean leaves
# them out, to make room in the carry for a default run's parts. --tests torch,train (say) runs those packages' tests alone.
# --speed-modes picks the speed step's configurations, each
# WHAT:PRECISION:CHANNELS_LAST with WHAT cnn or mlp (default: all six, fp32 first).
#
# --device cpu --quick runs the same steps on a CPU in under 5 minutes, on small
# sizes (the shim the binary was built with, a 600-image Fashion-MNIST, few steps),
# so that CI tests the script itself. --skip-tests leaves out the tests step, to measure
# again after the tests passed. --minutes is the whole run's budget (default 8.5,
# quick 4); the speed step stops starting configurations past its share, and the
# train step fills what is left.
set -uo pipefail

device=cuda
quick=0
skip_tests=0
only=""
test_pkgs=""
speed_modes=cnn:fp32:false,cnn:bf16:false,mlp:fp32:false,mlp:bf16:false,cnn:fp32:true,cnn:bf16:true
minutes=""
train_seeds=""
first_seed=1
shim=""
fmnist=""
archive=""
default_from=""
default_to=""
out=""
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
	case $1 in
	--device) device=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--skip-tests) skip_tests=1; shift ;;
	--only) only=$2; shift 2 ;;
	--speed-modes) speed_modes=$2; shift 2 ;;
	--tests) test_pkgs=$2; shift 2 ;;
	--minutes) minutes=$2; shift 2 ;;
	--fmnist) fmnist=$2; shift 2 ;;
	--train-seeds) train_seeds=$2; shift 2 ;;
	--first-seed) first_seed=$2; shift 2 ;;
	--shim) shim=$2; shift 2 ;;
	--archive)
		[ -n "$2" ] || { echo "gpu-acceptance.sh: --archive: give a file" >&2; exit 2; }
		archive=$(realpath -m "$2"); shift 2 ;;
	--default-from | --default-to)
		[ $# -ge 2 ] || { echo "gpu-acceptance.sh: $1: give a folder" >&2; exit 2; }
		if [ "$1" = --default-from ]; then default_from=$(realpath -m "$2"); else default_to=$(realpath -m "$2"); fi
		shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "gpu-acceptance.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
	*) [ -z "$out" ] || { echo "gpu-acceptance.sh: one OUTDIR, got $out and $1" >&2; exit 2; }; out=$1; shift ;;
	esac
done
[ -n "$out" ] || { echo "gpu-acceptance.sh: give OUTDIR" >&2; usage >&2; exit 2; }
case $device in cuda | cpu) ;; *) echo "gpu-acceptance.sh: --device $device: want cuda or cpu" >&2; exit 2 ;; esac
for s in ${only//,/ }; do
	case $s in devices | dist | tests | speed | parity | train | default) ;;
	*) echo "gpu-acceptance.sh: --only $only: unknown step $s (want devices, dist, tests, speed, parity, train, default)" >&2; exit 2 ;;
	esac
done
# The default run and the train step would each take the time left.
if [[ ",$only," == *,default,* ]]; then
	[[ ",$only," != *,train,* ]] || { echo "gpu-acceptance.sh: --only $only: default and train each take the time left; run them in two calls" >&2; exit 2; }
	[ -n "$default_to" ] || { echo "gpu-acceptance.sh: the default step needs --default-to DIR for the run's parts" >&2; exit 2; }
elif [ -n "$default_from$default_to" ]; then
	echo "gpu-acceptance.sh: --default-from and --default-to are for --only default" >&2
	exit 2
fi
if [ -n "$default_from" ] && [ ! -f "$default_from/default-run.sha256" ]; then
	echo "gpu-acceptance.sh: --default-from $default_from: no default-run.sha256 there (the list of a run's parts the default step writes)" >&2
	exit 2
fi
for m in ${speed_modes//,/ }; do
	[[ $m =~ ^(cnn|mlp):(fp32|bf16):(true|false)$ ]] ||
		{ echo "gpu-acceptance.sh: --speed-modes: $m: want cnn|mlp:fp32|bf16:true|false" >&2; exit 2; }
done
[ -n "$minutes" ] || { [ $quick = 1 ] && minutes=4 || minutes=8.5; }
# --quick trains two, so that CI runs the side-by-side path.
[ -n "$train_seeds" ] || { [ $device = cuda ] && train_seeds=4 || { [ $quick = 1 ] && train_seeds=2 || train_seeds=1; }; }
[[ $train_seeds =~ ^[1-9][0-9]*$ ]] || { echo "gpu-acceptance.sh: --train-seeds $train_seeds: want a count from 1" >&2; exit 2; }
# No leading zero: bash's arithmetic would read it as octal.
[[ $first_seed =~ ^(0|[1-9][0-9]*)$ ]] || { echo "gpu-acceptance.sh: --first-seed $first_seed: want a seed, 0 or more" >&2; exit 2; }

[ -z "$fmnist" ] || fmnist=$(realpath -m "$fmnist") # the tests look for it from their package folders
out=$(realpath -m "$out")                            # from the caller's folder, as --archive
if [ -n "$shim" ]; then
	[ $device = cuda ] || { echo "gpu-acceptance.sh: --shim is for --device cuda (the CPU uses the binary's own shim)" >&2; exit 2; }
	[ -f "$shim" ] || { echo "gpu-acceptance.sh: --shim $shim: no such file" >&2; exit 2; }
	shim=$(realpath "$shim")
fi
cd "$(dirname "$0")/.."
repo=$PWD
# A run's figures must be its own: a folder left by an earlier run would lend them.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
	echo "gpu-acceptance.sh: $out is not empty: give a new OUTDIR" >&2
	exit 2
fi
case $archive in "$out"/*)
	echo "gpu-acceptance.sh: --archive $archive is inside OUTDIR $out, which it packs: put it elsewhere" >&2
	exit 2 ;;
esac
case $default_to/ in "$out"/*)
	echo "gpu-acceptance.sh: --default-to $default_to is inside OUTDIR $out, whose archive would take the parts: put it elsewhere" >&2
	exit 2 ;;
esac
mkdir -p "$out"
log=$out/acceptance.log
steps=$out/steps.jsonl
: >"$log"
: >"$steps"
t_start=$SECONDS
budget_s=$(awk -v m="$minutes" 'BEGIN { if (m + 0 <= 0) exit 1; printf "%d", m * 60 }') ||
	{ echo "gpu-acceptance.sh: --minutes $minutes: want a positive number" >&2; exit 2; }
deadline=$((t_start + budget_s))
exec 3>&1 4>&2 > >(tee -a "$log") 2>&1
tee_pid=$!
# pack: --archive, on every exit after this, also the early ones (a shim that did
# not build is when its log is wanted).
pack() {
	local code=$?
	[ -n "$archive" ] || return
	# The log whole before it is packed: tee ends once its pipe closes (give up after
	# 5 s, should a stray child still hold it).
	exec 1>&3 2>&4
	for _ in $(seq 50); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
	mkdir -p "$(dirname "$archive")" &&
		tar cJf "$archive" --exclude='*.safetensors' --exclude='*.so' --exclude='*.lock' \
			-C "$(dirname "$out")" "$(basename "$out")" &&
		echo "acceptance: packed $out into $archive ($(du -h "$archive" | cut -f1))" ||
		{ echo "acceptance: --archive $archive: tar failed"; code=1; }
	exit $code
}
trap pack EXIT

say() { echo "acceptance [$((SECONDS - t_start)) s]: $*"; }
failed=0
# record NAME STATUS SECONDS DETAIL: one line of steps.jsonl.
record() {
	python3 -c 'import json,sys; print(json.dumps({"step":sys.argv[1],"status":sys.argv[2],"seconds":int(sys.argv[3]),"detail":sys.argv[4]}))' "$@" >>"$steps"
	[ "$2" != fail ] || failed=1
	say "$1: $2 ($3 s) $4"
}
left() { echo $((deadline - SECONDS)); }
# wanted STEP: whether --only leaves STEP in; a step left out is recorded as skipped.
wanted() {
	[ -z "$only" ] || [[ ",$only," == *",$1,"* ]] && return 0
	record "$1" skipped 0 "--only $only"
	return 1
}

# The Python with PyTorch: $PYTHON, python3, or Debian's (make bench-deps installs
# python3-torch for /usr/bin/python3, which a pyenv python3 on PATH does not see).
python=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
	if (cd /tmp && "$p" -c 'import torch') 2>/dev/null; then python=$p; break; fi
done
[ -z "$python" ] || export PYTHON=$python

# --- binaries -------------------------------------------------------------------------
# A pack newer than the binaries replaces them: the device machine keeps ignored
# files between calls, and an older ./emclust there would be tested in its place.
# need_tests: whether the tests step runs, the one that needs build/tests.
need_tests=0
[ $skip_tests = 0 ] && { [ -z "$only" ] || [[ ",$only," == *,tests,* ]]; } && need_tests=1
have_binaries() { [ -x ./emclust ] && { [ $need_tests = 0 ] || ls build/tests/*.test >/dev/null 2>&1; }; }
if [ -f build/gpu-bundle.tar.xz ] && { ! have_binaries || [ build/gpu-bundle.tar.xz -nt ./emclust ]; }; then
	say "unpacking build/gpu-bundle.tar.xz (make gpu-pack)"
	# -m: the files dated now, so that the -nt above settles.
	tar xJmf build/gpu-bundle.tar.xz || { echo "gpu-acceptance.sh: build/gpu-bundle.tar.xz did not unpack" >&2; exit 1; }
fi
if [ -z "$fmnist" ]; then
	fmnist=/usr/share/datasets/fashion-mnist
	[ -d "$fmnist" ] || fmnist=$repo/build/fmnist
	# Binaries kept from an earlier unpack left the pack's data in it.
	if [ ! -d "$fmnist" ] && [ -f build/gpu-bundle.tar.xz ]; then
		say "unpacking build/fmnist from build/gpu-bundle.tar.xz"
		tar xJf build/gpu-bundle.tar.xz build/fmnist || say "build/gpu-bundle.tar.xz holds no build/fmnist"
	fi
fi
if ! have_binaries; then
	if command -v go >/dev/null; then
		say "no ./emclust or build/tests: make gpu-bundle"
		make gpu-bundle >/dev/null || { echo "gpu-acceptance.sh: make gpu-bundle failed" >&2; exit 1; }
	else
		echo "gpu-acceptance.sh: no ./emclust or build/tests/*.test, and no Go here: run make gpu-bundle on a Go machine and carry them over" >&2
		exit 1
	fi
fi

# --- shim -----------------------------------------------------------------------------
# make_shim: build/cuda/libemtorch.so and beside it libemtorch.so.torch, the PyTorch
# it was built against, which --shim must match: a shim of another libtorch with the
# same sonames may load and fail later.
make_shim() {
	if [ -z "$shim" ]; then
		scripts/gpu-setup.sh && echo "$torch_here" >build/cuda/libemtorch.so.torch
		return
	fi
	[ "$torch_here" != "no PyTorch" ] || { echo "this machine's python cannot import torch"; return 1; }
	local built
	built=$(cat "$shim.torch" 2>/dev/null) || { echo "--shim $shim: no $shim.torch saying which PyTorch built it"; return 1; }
	[ "$built" = "$torch_here" ] || { echo "--shim $shim was built against $built; this machine has $torch_here"; return 1; }
	mkdir -p build/cuda || return 1
	if ! [ "$shim" -ef build/cuda/libemtorch.so ]; then
		cp "$shim" build/cuda/libemtorch.so && cp "$shim.torch" build/cuda/libemtorch.so.torch || return 1
	fi
	echo "the shim of --shim $shim"
}
# backends: the process-group backends the shim has, as emclust devices says: one
# built without Gloo's headers fails the dist step and the in-process group tests.
backends() { ./emclust devices 2>/dev/null | head -1 | grep -o -E 'process groups: [a-z, ]+|no process groups' || echo "backends unknown"; }
t0=$SECONDS
if [ $device = cuda ]; then
	torch_here=$(cd /tmp && "${python:-python3}" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "cxx11 ABI", int(torch.compiled_with_cxx11_abi()))' 2>/dev/null) || torch_here="no PyTorch"
	if make_shim >"$out/shim.log" 2>&1; then
		torch_lib=$(cd /tmp && "$python" -c 'import torch,os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
		export LD_LIBRARY_PATH=$repo/build/cuda:$torch_lib:${LD_LIBRARY_PATH:-}
		export EMCLUST_TEST_LIBTORCH=${torch_lib%/lib}
		cp build/cuda/libemtorch.so build/cuda/libemtorch.so.torch "$out/" # for --shim next time
		record shim ok $((SECONDS - t0)) "$torch_here; $(backends); $(tail -1 "$out/shim.log")"
	else
		record shim fail $((SECONDS - t0)) "$torch_here: $(tail -3 "$out/shim.log" | tr '\n' ' ')"
		python3 scripts/acceptance-summary.py "$out" "$device" || true
		exit 1
	fi
else
	record shim ok 0 "the CPU shim the binary was built with; $(backends)"
fi

# --- devices --------------------------------------------------------------------------
t0=$SECONDS
if ! wanted devices; then :
elif ./emclust devices >"$out/devices.txt" 2>&1 && { [ $device = cpu ] || grep -q '^cuda' "$out/devices.txt"; }; then
	record devices ok $((SECONDS - t0)) "$(tr '\n' ';' <"$out/devices.txt")"
else
	record devices fail $((SECONDS - t0)) "$(tr '\n' ';' <"$out/devices.txt")"
fi

# --- data-parallel ranks on this device -----------------------------------------------
# One machine with one GPU: NCCL (the default on CUDA where the shim has it) at world
# size 1, then two ranks over Gloo sharing the device, which moves CUDA tensors through
# Gloo. Several GPUs or machines are not measured here.
t0=$SECONDS
dist_dev=$device; [ $device = cuda ] && dist_dev=cuda:0
port=$(( 29500 + RANDOM % 1000 ))
if ! wanted dist; then :
elif RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
	./emclust train --device "$dist_dev" --epochs 2 --kmeans=false --out "$out/dist-world1" >"$out/dist.log" 2>&1 &&
	./emclust train --nproc 2 --dist-backend gloo --device "$dist_dev" --epochs 2 --kmeans=false \
		--out "$out/dist-gloo2" >>"$out/dist.log" 2>&1; then
	record dist ok $((SECONDS - t0)) "$(grep -hE '^emclust: [0-9]+ ranks? \(' "$out/dist.log" | tr '\n' ';')"
else
	record dist fail $((SECONDS - t0)) "$(tail -3 "$out/dist.log" | tr '\n' ' ')"
fi

# --- Go tests on the device -----------------------------------------------------------
t0=$SECONDS
pkgs=()
for tb in build/tests/*.test; do
	name=$(basename "$tb" .test)
	# quick: the packages whose tests run ops on the device, not the CLI's end-to-end suite
	if [ $quick = 1 ]; then case $name in torch | loss | model | transform) ;; *) continue ;; esac; fi
	[ $need_tests = 1 ] || continue
	[ -z "$test_pkgs" ] || [[ ",$test_pkgs," == *",$name,"* ]] || continue
	pkgs+=("$name")
done
: >"$out/tests.tsv"
test_failed=0
for name in "${pkgs[@]}"; do
	dir=$name # each package with tests is a top-level folder named as its package
	t1=$SECONDS
	# EMTORCH_BACKTRACE=1: a fault inside libtorch also prints where it happened.
	# 10m: the command package took 4 minutes on an H200 beside two training runs.
	if (cd "$dir" && EMTORCH_BACKTRACE=1 EMCLUST_TEST_DEVICE=$device EMCLUST_TEST_BIN=$repo/emclust EMCLUST_TEST_FMNIST=$fmnist \
		"$repo/build/tests/$name.test" -test.count=1 -test.timeout=10m >"$out/test-$name.log" 2>&1); then
		printf '%s\tok\t%d\n' "$name" $((SECONDS - t1)) >>"$out/tests.tsv"
	else
		printf '%s\tFAIL\t%d\n' "$name" $((SECONDS - t1)) >>"$out/tests.tsv"
		grep -E -- '--- FAIL|_test.go:[0-9]+:|^emtorch: signal|^  (fault at|stack) ' "$out/test-$name.log" | head -40
		test_failed=1
	fi
done
if [ $skip_tests = 1 ]; then
	record tests skipped 0 "--skip-tests"
elif ! wanted tests; then :
elif [ ${#pkgs[@]} = 0 ]; then
	record tests fail 0 "no test binary in build/tests matches --tests ${test_pkgs:-(all)}"
elif [ $test_failed = 0 ]; then
	record tests ok $((SECONDS - t0)) "${#pkgs[@]} packages on $device"
else
	record tests fail $((SECONDS - t0)) "failed: $(awk '$2 == "FAIL" { printf "%s ", $1 }' "$out/tests.tsv")"
fi

# --- speed against the Python peers ---------------------------------------------------
t0=$SECONDS
if [ $quick = 1 ]; then
	cnns=mnist
	speed=(--steps 2 --warmup 1 --mlp-steps 20 --mlp-warmup 2 --repeats 1 --num-workers 0)
	speed_share=$(((deadline - SECONDS) * 30 / 100))
else
	cnns=mnist,cifar,stl10
	speed=(--steps 30 --warmup 5 --mlp-steps 300 --mlp-warmup 20 --repeats 1)
	speed_share=$(((deadline - SECONDS) * 35 / 100))
fi
# Without the parity and train steps after it, the speed step may use all the time left.
if [ -n "$only" ] && [[ ",$only," != *,parity,* && ",$only," != *,train,* && ",$only," != *,default,* ]]; then
	speed_share=$((deadline - SECONDS - 30))
fi
if ! wanted speed; then :
elif [ -z "$python" ]; then
	record speed fail 0 "no python3 here imports torch (Debian/Ubuntu: make bench-deps)"
else
	done_modes="" skipped=""
	speed_ok=1
	# The CNNs twofold in each precision and layout; the MLP (em; no layout) per precision.
	for mode in ${speed_modes//,/ }; do
		IFS=: read -r what p cl <<<"$mode"
		name=$what-$p-cl$cl
		if [ $((SECONDS - t0)) -ge $speed_share ]; then skipped="$skipped $name"; continue; fi
		if [ $what = cnn ]; then which=(--models "$cnns" --objective twofold); else which=(--models mlp); fi
		if scripts/bench/compare.sh "${which[@]}" "${speed[@]}" --python "$python" --device $device --precision "$p" \
			--channels-last "$cl" --emclust ./emclust --out "$out/speed-$name" >"$out/speed-$name.md" 2>"$out/speed-$name.log"; then
			done_modes="$done_modes $name"
			cat "$out/speed-$name.md"
		else
			speed_ok=0
			tail -5 "$out/speed-$name.log"
		fi
	done
	detail="ran:${done_modes:- none}${skipped:+; out of time for:$skipped}"
	[ $speed_ok = 1 ] && [ -n "$done_modes" ] && record speed ok $((SECONDS - t0)) "$detail" || record speed fail $((SECONDS - t0)) "$detail"
fi

# --- accuracy: parity, then a long run ------------------------------------------------
t0=$SECONDS
data=$fmnist
if [ $quick = 1 ] && [ -d "$fmnist" ]; then
	# 500 training and 100 test images, as uncompressed IDX files.
	data=$out/fmnist-small
	python3 - "$fmnist" "$data" 500 100 <<'EOF' || data=""
import gzip, os, struct, sys
src, dst, n_train, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst, exist_ok=True)
def read(name):
    for p in (os.path.join(src, name), os.path.join(src, name + ".gz")):
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    sys.exit("no %s in %s" % (name, src))
for split, n in (("train", n_train), ("t10k", n_test)):
    img, lab = read(split + "-images-idx3-ubyte"), read(split + "-labels-idx1-ubyte")
    _, _, h, w = struct.unpack(">IIII", img[:16])
    open(os.path.join(dst, split + "-images-idx3-ubyte"), "wb").write(struct.pack(">IIII", 0x803, n, h, w) + img[16:16 + n * h * w])
    open(os.path.join(dst, split + "-labels-idx1-ubyte"), "wb").write(struct.pack(">II", 0x801, n) + lab[8:8 + n])
EOF
fi
fm=(--dataset fashion-mnist --data-dir "$data" --device "$device")
if [ -z "$data" ] || [ ! -d "$data" ]; then
	! wanted parity || record parity fail 0 "no Fashion-MNIST at $fmnist (--fmnist DIR: the four IDX files)"
	! wanted train || record train fail 0 "no Fashion-MNIST at $fmnist"
else
	if [ $quick = 1 ]; then par=(--seeds 1 -- --epochs 1 --batch-size 100); else par=(--seeds 1,2 -- --epochs 2); fi
	if ! wanted parity; then :
	elif scripts/parity.sh --modes fp32,bf16 --tol 0.05 --emclust ./emclust --out "$out/parity" "${par[@]:0:2}" \
		"${par[@]:2}" "${fm[@]}" >"$out/parity.md" 2>"$out/parity.log"; then
		record parity ok $((SECONDS - t0)) "$(grep -E '^\| (fp32|bf16) ' "$out/parity.md" | tr '\n' ' ')"
	else
		record parity fail $((SECONDS - t0)) "$(tail -3 "$out/parity.md" "$out/parity.log" | tr '\n' ' ')"
	fi
	[ ! -e "$out/parity.md" ] || cat "$out/parity.md"

	t0=$SECONDS
	budget=$(($(left) - 20))
	if ! wanted train; then :
	elif [ $budget -lt 20 ]; then
		record train fail 0 "no time left for the long run ($budget s)"
	else
		say "train: Fashion-MNIST twofold, $train_seeds run(s) side by side, for ${budget} s"
		extra=()
		[ $quick = 1 ] && extra=(--batch-size 100 --eval-every 1)
		# Several runs share the CPU's threads (and the GPU); one run keeps the default.
		threads=$(( $(nproc) / train_seeds )); [ $threads -ge 1 ] || threads=1
		[ "$train_seeds" = 1 ] || extra+=(--threads $threads)
		pids=()
		seeds=$(seq "$first_seed" $((first_seed + train_seeds - 1)))
		for s in $seeds; do
			timeout -s INT "$budget" ./emclust train "${fm[@]}" --objective twofold --epochs 1000 --quiet \
				--restarts 1 --seed "$s" --out "$out/train-s$s" "${extra[@]}" >"$out/train-s$s.txt" 2>&1 &
			pids+=($!)
		done
		train_ok=1 detail="" i=0 dirs=()
		for s in $seeds; do
			dirs+=("$out/train-s$s")
			wait "${pids[$i]}"
			code=$?
			i=$((i + 1))
			epochs=$(wc -l <"$out/train-s$s/metrics.jsonl" 2>/dev/null || echo 0)
			# 124: the time was up; SIGINT stopped the run, and its checkpoint holds the last saved epoch.
			if [ "$epochs" -gt 0 ] && { [ $code = 0 ] || [ $code = 124 ]; }; then
				detail="$detail seed $s: $epochs epochs (exit $code);"
			else
				train_ok=0
				detail="$detail seed $s: exit $code, $epochs epochs: $(tail -2 "$out/train-s$s.txt" | tr '\n' ' ');"
			fi
		done
		# The replay only informs; a failure is logged, not the step's.
		if [ $train_ok = 1 ] && [ "$train_seeds" -ge 2 ]; then
			python3 scripts/study/trial_replay.py --trials 5,10,15,20,25,30 --restarts 2,3,4 "${dirs[@]}" >"$out/trials.md" 2>>"$log" &&
				cat "$out/trials.md"
		fi
		if [ $train_ok = 1 ]; then
			record train ok $((SECONDS - t0)) "${detail# }"
		else
			record train fail $((SECONDS - t0)) "${detail# }"
		fi
	fi
fi

# --- one run at the defaults, over lends ----------------------------------------------
# A stopped run resumes where its last epoch was saved, so each lend adds its minutes.
t0=$SECONDS
if [[ ",$only," != *,default,* ]]; then
	record default skipped 0 "only where --only names it"
elif [ -z "$data" ] || [ ! -d "$data" ]; then
	record default fail 0 "no Fashion-MNIST at $fmnist"
else
	run=$out/default-run
	how=(--dataset fashion-mnist --data-dir "$data" --device "$device" --out "$run")
	# The 600 images of --quick make 5 batches of the default 128, with a last of 88.
	[ $quick = 0 ] || how+=(--batch-size 100)
	from_ok=1
	if [ -n "$default_from" ]; then
		say "default: unpacking the run from $default_from"
		# The parts the list names, checked, in order: a folder may hold stale ones too.
		# The run's own settings come with it: only where its data lies now, and the device.
		(cd "$default_from" && sha256sum --quiet -c default-run.sha256 &&
			cat $(awk '{ print $2 }' default-run.sha256)) | tar -xJf - -C "$out" && [ -d "$run" ] || from_ok=0
		how=(--resume "$run" --data-dir "$data" --device "$device")
	fi
	budget=$(($(left) - 30))
	if [ $from_ok = 0 ]; then
		record default fail $((SECONDS - t0)) "the parts default-run.sha256 lists in $default_from are missing or damaged, or did not unpack into default-run"
	elif [ $budget -lt 20 ]; then
		record default fail 0 "no time left for the run ($budget s)"
	else
		say "default: emclust train ${how[*]}, for $budget s"
		# -k: a run that does not stop within 20 s of SIGINT is killed (its last checkpoint stands).
		timeout -s INT -k 20 "$budget" ./emclust train "${how[@]}" --quiet >"$out/default.txt" 2>&1
		code=$?
		epochs=$(cat "$run/metrics.jsonl" 2>/dev/null | wc -l)
		trials=$(cat "$run"/trials/seed-*/metrics.jsonl 2>/dev/null | wc -l)
		state="$epochs epochs of the kept run"
		[ "$epochs" -gt 0 ] || state="among the trials ($trials trial epochs)"
		[ ! -f "$run/summary.json" ] || state="finished, $epochs epochs: $(tail -1 "$out/default.txt")"
		# 124: the time was up; SIGINT stopped the run at a saved epoch.
		if [ $code != 0 ] && [ $code != 124 ]; then
			record default fail $((SECONDS - t0)) "exit $code, $state: $(tail -2 "$out/default.txt" | tr '\n' ' ')"
		elif [ "$epochs" = 0 ] && [ "$trials" = 0 ]; then
			record default fail $((SECONDS - t0)) "stopped before its first epoch was saved: give it more minutes"
		elif mkdir -p "$default_to" && rm -f "$default_to"/default-run.tar.xz.part-* "$default_to/default-run.sha256" &&
			tar -C "$out" --exclude='*.lock' -cf - default-run | xz -T0 -3 | split -b 15M -d -a 2 - "$default_to/default-run.tar.xz.part-" &&
			(cd "$default_to" && sha256sum default-run.tar.xz.part-* >default-run.sha256); then
			bytes=$(cat "$default_to"/default-run.tar.xz.part-* | wc -c)
			detail="exit $code, $state; $(wc -l <"$default_to/default-run.sha256") part(s), $((bytes / 1048576)) MiB, in $default_to"
			# What the 64 MiB carry leaves beside make gpu-pack-lean (32 MiB) and the repository.
			[ $bytes -le $((24 * 1048576)) ] || detail="$detail (over the 24 MiB a lean pack leaves in the carry: stopped among the trials?)"
			record default ok $((SECONDS - t0)) "$detail"
		else
			record default fail $((SECONDS - t0)) "exit $code, $state; packing the run into $default_to failed"
		fi
	fi
fi

python3 scripts/acceptance-summary.py "$out" "$device" || failed=1
say "done in $((SECONDS - t_start)) s; results in $out/results.json"
exit $failed
