#!/usr/bin/env bash
# parity.sh: the accuracy-parity check of the reduced-precision and channels-last
# modes against float32. It trains the same run (same data, seeds and settings) once
# per mode and seed, and prints ACC/NMI per mode with the difference to fp32.
#
#   scripts/parity.sh --seeds 1,2,3,4,5                          # embedded digits, MLP
#   scripts/parity.sh --seeds 1,2 --modes fp32,bf16,bf16+cl -- \
#       --dataset fashion-mnist --objective em-aug --epochs 1
#
# Everything after -- goes to `emclust train` unchanged. Exit status 1 when a mode's
# mean ACC falls more than --tol below fp32's: bf16 is offered only where it keeps
# the accuracy. Run folders and the JSON summaries go to --out (default: a fresh
# temporary folder).
set -euo pipefail

seeds=1,2,3
modes=fp32,bf16
tol=0.02
emclust=${EMCLUST:-./emclust}
python=${PYTHON:-python3}
out=""

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; echo "flags: --seeds --modes (fp32, bf16, fp32+cl, bf16+cl) --tol --emclust --python --out [-- train flags]"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--seeds) seeds=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--tol) tol=$2; shift 2 ;;
	--emclust) emclust=$2; shift 2 ;;
	--python) python=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--) shift; break ;;
	-h | --help) usage; exit 0 ;;
	*) echo "parity.sh: unknown argument $1 (train flags go after --)" >&2; usage >&2; exit 2 ;;
	esac
done

[ -x "$emclust" ] || { echo "parity.sh: no emclust binary at $emclust (make build, or --emclust PATH)" >&2; exit 1; }
command -v "$python" >/dev/null || { echo "parity.sh: no $python for the summary table (Debian/Ubuntu: apt-get install python3, or --python PATH)" >&2; exit 1; }
[ -n "$out" ] || out=$(mktemp -d -t emclust-parity.XXXXXX)
mkdir -p "$out"
raw=$out/raw.jsonl
: >"$raw"

IFS=, read -ra seed_list <<<"$seeds"
IFS=, read -ra mode_list <<<"$modes"
case ",$modes," in *,fp32,*) ;; *) echo "parity.sh: --modes must include fp32, the reference" >&2; exit 2 ;; esac
echo "parity.sh: modes $modes, seeds $seeds, train flags: ${*:-(defaults)}; runs in $out" >&2
for seed in "${seed_list[@]}"; do
	for mode in "${mode_list[@]}"; do
		flags=()
		case "$mode" in
		fp32 | bf16) flags=(--precision "$mode") ;;
		fp32+cl | bf16+cl) flags=(--precision "${mode%+cl}" --channels-last) ;;
		*) echo "parity.sh: unknown mode $mode (want fp32, bf16, fp32+cl, bf16+cl)" >&2; exit 2 ;;
		esac
		run=$out/$mode-seed$seed
		rm -rf "$run"
		echo "  seed $seed $mode" >&2
		line=$("$emclust" train --quiet --json --restarts 1 --seed "$seed" "${flags[@]}" --out "$run" "$@")
		printf '{"mode":"%s","seed":%s,"summary":%s}\n' "$mode" "$seed" "$line" >>"$raw"
	done
done

"$python" - "$raw" "$tol" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tol = float(sys.argv[2])
by = {}
for r in rows:
    by.setdefault(r["mode"], []).append(r)
def stat(rs, key):
    v = [r["summary"]["scores"][key] for r in rs]
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)
ref, _ = stat(by["fp32"], "acc")
print("| mode | seeds | ACC | NMI | ACC − fp32 | s per run |")
print("|---|---:|---:|---:|---:|---:|")
failed = []
for mode, rs in by.items():
    acc, acc_sd = stat(rs, "acc")
    nmi, nmi_sd = stat(rs, "nmi")
    secs = statistics.mean(r["summary"]["seconds"] for r in rs)
    print("| %s | %d | %.4f ± %.4f | %.4f ± %.4f | %+.4f | %.1f |" % (
        mode, len(rs), acc, acc_sd, nmi, nmi_sd, acc - ref, secs))
    if acc < ref - tol:
        failed.append(mode)
print()
print("per seed ACC: " + "; ".join(
    "%s %s" % (m, ", ".join("%.4f" % r["summary"]["scores"]["acc"] for r in rs)) for m, rs in by.items()))
if failed:
    print("parity.sh: %s lose more than %.3f ACC against fp32" % (", ".join(failed), tol))
    sys.exit(1)
EOF
