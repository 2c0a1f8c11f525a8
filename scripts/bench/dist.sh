#!/usr/bin/env bash
# dist.sh [--images N] [--epochs E] [--emclust BIN] OUTDIR
#
# What the collectives cost per step on this machine: the training step at one global
# batch of 128, as one process (all cores, then one core) and as 2 ranks of --nproc
# (one core each), with global batch statistics and with --sync-stats=false, for the
# digits MLP (em) and the MNIST CNN (twofold) on the first N Fashion-MNIST images.
# Prints a markdown table of the median ms per step over epochs 2..E (epoch 1 warms up).
set -euo pipefail

images=4096 epochs=4 emclust=./emclust
while [ $# -gt 1 ]; do
  case $1 in
    --images) images=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --emclust) emclust=$2; shift 2 ;;
    *) echo "dist.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
out=${1:?usage: dist.sh [--images N] [--epochs E] [--emclust BIN] OUTDIR}
[ ! -e "$out" ] || { echo "dist.sh: $out exists; give a new folder" >&2; exit 1; }
mkdir -p "$out/fmnist"
emclust=$(realpath "$emclust")

# The first N Fashion-MNIST images as an MNIST-like set (Debian's dataset-fashion-mnist).
python3 - "$out/fmnist" "$images" <<'EOF'
import gzip, struct, sys
out, n = sys.argv[1], int(sys.argv[2])
src = "/usr/share/datasets/fashion-mnist/"
im = gzip.open(src + "train-images-idx3-ubyte.gz").read()[16:16 + n * 784]
lb = gzip.open(src + "train-labels-idx1-ubyte.gz").read()[8:8 + n]
n = len(lb)
open(out + "/train-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 28, 28) + im)
open(out + "/train-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + lb)
open(out + "/t10k-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, 0, 28, 28))
open(out + "/t10k-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, 0))
EOF

# ms per step: the median over epochs 2.. of seconds / steps from metrics.jsonl.
ms_per_step() {
  python3 - "$1/metrics.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.2f" % statistics.median(1000 * r["seconds"] / r["steps"] for r in rows))
EOF
}

echo "| model | 1 process, all cores | 1 process, 1 core | 2 ranks × 1 core | 2 ranks, --sync-stats=false |"
echo "|---|---:|---:|---:|---:|"
for model in mlp mnist; do
  if [ $model = mlp ]; then
    data=(--epochs $((epochs * 5)))
  else
    data=(--dataset mnist --data-dir "$out/fmnist" --epochs "$epochs" --channels-last=false)
  fi
  row="| $model"
  i=0
  for mode in "" "--threads 1" "--nproc 2" "--nproc 2 --sync-stats=false"; do
    run=$out/$model-$i
    # shellcheck disable=SC2086
    "$emclust" train --quiet --kmeans=false --restarts 1 --eval-every 0 --batch-size 128 "${data[@]}" $mode --out "$run" >/dev/null
    row="$row | $(ms_per_step "$run")"
    i=$((i + 1))
  done
  echo "$row |"
done
