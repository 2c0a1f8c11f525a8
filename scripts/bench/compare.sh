#!/usr/bin/env bash
# compare.sh: time the same training step in emclust and in plain Python PyTorch
# (scripts/bench/reference.py, both of its input pipelines) on one device, with the same
# models, objectives, steps and warmup, and print a markdown table of ms/step and the
# ratios emclust/python (below 1: emclust is faster). Each side runs on its default
# CPU threads (emclust one per CPU it may use, and one for a step too small to share;
# the peer one per CPU it may use), or both on --threads N.
#
#   scripts/bench/compare.sh --models mlp,mnist --device cpu --steps 10 --warmup 2
#   scripts/bench/compare.sh --models mnist,cifar,stl10 --device cuda --steps 50 \
#       --emclust ./emclust --python python3
#
# --objective is the CNNs' (default: emclust's and the peer's own); the MLP trains on
# vectors, so em alone, and --models mlp,mnist --objective twofold times mlp em beside
# mnist twofold.
#
# Every configuration runs --repeats times, the implementations taking turns so that a
# busy machine slows them alike; the table keeps the fastest run of each (the least
# disturbed). The MLP's step takes about a millisecond, so it runs --mlp-steps steps
# after --mlp-warmup (default 500 and 20) for a timing window that one preemption does
# not dominate. All raw JSON lines go to --out (default: a fresh temporary folder).
#
# On a CPU that other work keeps busy, OpenMP's spin-waiting decides the result more
# than the code does: libgomp spins between parallel regions unless it manages more
# threads than there are CPUs. emclust keeps its libtorch calls on one OS thread (one
# OpenMP pool, as a Python process has; before that, several pools spun against each
# other and halved its MLP step rate on 2 cores). Run once
# as is and once with OMP_WAIT_POLICY=PASSIVE in the environment (both sides inherit
# it) to tell the two apart; the footer records the setting.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
models=mlp,mnist
objective=""
device=cpu
steps=10
warmup=2
mlp_steps=500
mlp_warmup=20
threads="" # each side's default (see above)
repeats=2
workers=2
batch=128
emclust=${EMCLUST:-./emclust}
python=${PYTHON:-python3}
out=""
precision=fp32
channels_last=false

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; echo "flags: --models --objective --device --steps --warmup --mlp-steps --mlp-warmup --threads --repeats --num-workers --batch-size --emclust --python --out --precision --channels-last"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--models) models=$2; shift 2 ;;
	--objective) objective=$2; shift 2 ;;
	--device) device=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--mlp-steps) mlp_steps=$2; shift 2 ;;
	--mlp-warmup) mlp_warmup=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--repeats) repeats=$2; shift 2 ;;
	--num-workers) workers=$2; shift 2 ;;
	--batch-size) batch=$2; shift 2 ;;
	--emclust) emclust=$2; shift 2 ;;
	--python) python=$2; python_given=1; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--precision) precision=$2; shift 2 ;;
	--channels-last) channels_last=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done

[ -x "$emclust" ] || { echo "compare.sh: no emclust binary at $emclust (make build, or --emclust PATH)" >&2; exit 1; }
command -v "$python" >/dev/null || { echo "compare.sh: no $python (--python PATH)" >&2; exit 1; }
# Debian's python3-torch (make bench-deps) is for /usr/bin/python3, which a pyenv or
# virtualenv python3 earlier on PATH does not see.
if ! (cd /tmp && "$python" -c 'import torch') 2>/dev/null; then
	if [ -z "${python_given:-}" ] && (cd /tmp && /usr/bin/python3 -c 'import torch') 2>/dev/null; then
		python=/usr/bin/python3
	else
		echo "compare.sh: $python cannot import torch: install PyTorch for it (Debian/Ubuntu: make bench-deps, or apt-get install python3-torch)" >&2; exit 1
	fi
fi
[ -n "$out" ] || out=$(mktemp -d -t emclust-compare.XXXXXX)
mkdir -p "$out"
raw=$out/raw.jsonl
: >"$raw"

# appended WHAT N: at least N more lines of raw JSON since the last call, or stop: a
# run that exits 0 and times less than asked must not leave rows out of the table
# unnoticed (one that fails stops the script already, under set -e).
lines=0
appended() {
	local n
	n=$(grep -c . "$raw" || true)
	[ $((n - lines)) -ge "$2" ] || { echo "compare.sh: $1 wrote $((n - lines)) results, want $2" >&2; exit 1; }
	lines=$n
}

echo "compare.sh: $models on $device, $steps steps after $warmup warmup (mlp: $mlp_steps after $mlp_warmup), ${threads:-default} threads, best of $repeats; raw JSON in $raw" >&2
IFS=, read -ra model_list <<<"$models"
for m in "${model_list[@]}"; do
	if [ "$m" = mlp ]; then
		common=(--device "$device" --steps "$mlp_steps" --warmup "$mlp_warmup" --batch-size "$batch")
	else
		common=(--device "$device" --steps "$steps" --warmup "$warmup" --batch-size "$batch")
	fi
	common+=(--threads "${threads:-0}") # 0: emclust's default count, and PyTorch's
	common+=(--precision "$precision" --channels-last "$channels_last")
	IFS=, read -ra precisions <<<"$precision"
	IFS=, read -ra layouts <<<"$channels_last"
	IFS=, read -ra objectives <<<"${objective:-default}"
	want=${#precisions[@]}
	# The MLP has no layout and trains em alone: timed once a precision.
	[ "$m" = mlp ] || want=$((want * ${#layouts[@]} * ${#objectives[@]}))
	objflag=()
	[ -z "$objective" ] || { [ "$m" = mlp ] && [ "$objective" != em ]; } || objflag=(--objective "$objective")
	for ((r = 1; r <= repeats; r++)); do
		echo "  $m run $r/$repeats: emclust" >&2
		"$emclust" bench --model "$m" "${objflag[@]}" "${common[@]}" --json |
			sed 's/^{/{"impl":"emclust",/' >>"$raw"
		appended "emclust bench --model $m" "$want"
		for aug in cpu device; do
			echo "  $m run $r/$repeats: python --aug $aug" >&2
			"$python" "$here/reference.py" --model "$m" "${objflag[@]}" "${common[@]}" \
				--aug "$aug" --num-workers "$workers" >>"$raw"
			appended "reference.py --model $m --aug $aug" "$want"
		done
	done
done

"$python" - "$raw" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
impls = ["emclust", "python-cpu-aug", "python-device-aug"]
best, runs, order = {}, {}, []
for r in rows:
    key = (r["arch"], r["objective"], r.get("precision", "fp32"),
           "NHWC" if r.get("channels_last") else ("-" if r["arch"] == "mlp" else "NCHW"))
    if key not in order:
        order.append(key)
    k = key + (r["impl"],)
    runs.setdefault(k, []).append(r["ms_per_step"])
    if k not in best or r["ms_per_step"] < best[k]["ms_per_step"]:
        best[k] = r
def ms(r):
    return "%.2f" % r["ms_per_step"] if r else "-"
def ratio(a, b):
    return "%.3g" % (a["ms_per_step"] / b["ms_per_step"]) if a and b else "-"
def num(v):
    if v is None:
        return "-"
    return "%.3g" % v
print("| model | objective | precision | layout | device | threads (emclust / python) | steps | emclust ms/step | python cpu-aug ms/step | python device-aug ms/step "
      "| emclust / py cpu-aug | emclust / py device-aug | GFLOP/step | emclust TFLOP/s |")
print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in order:
    e, c, d = (best.get(key + (i,)) for i in impls)
    any_ = e or c or d
    py = d or c
    threads = "%s / %s" % (e["cpu_threads"] if e else "-", py["cpu_threads"] if py else "-")
    print("| %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
        key[0], key[1], key[2], key[3], any_["device"], threads, any_["steps"], ms(e), ms(c), ms(d),
        ratio(e, c), ratio(e, d), num((e or c or d).get("gflop_per_step")),
        num(e.get("achieved_tflops")) if e else "-"))
print()
print("All runs (ms/step):")
for key in order:
    print("- %s %s %s %s: " % key + "; ".join(
        "%s %s" % (i, ", ".join("%.2f" % v for v in runs.get(key + (i,), []))) for i in impls))
libs = sorted({r.get("aug_lib") for r in rows if r["impl"] == "python-cpu-aug" and r["arch"] != "mlp"})
if libs:
    print("\npython cpu-aug transforms: %s; torch %s" % (", ".join(libs), rows[-1].get("torch", "?")))
import os
print("\nOMP_WAIT_POLICY=%s" % os.environ.get("OMP_WAIT_POLICY", "(unset)"))
EOF
