#!/usr/bin/env bash
# allocators.sh: page faults, peak RSS and step time of `emclust bench` on the CPU under
# several CPU memory allocators, to choose the one emclust sets up for itself.
#
#   scripts/bench/allocators.sh [--models mlp,mnist] [--steps 12] [--emclust ./emclust]
#
# Each configuration runs the bench twice, with 2 and with --steps timed steps after the
# same warmup; the difference of the two minor-fault counts (GNU time's %R) over the
# extra steps is the faults per step, free of start-up and data loading. Configurations:
#   default     what emclust does by itself (EMCLUST_MALLOC=default: glibc untouched)
#   glibc-env   glibc with MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ = 1e9 (the
#               environment a user would have to know about)
#   jemalloc    LD_PRELOAD of Debian's libjemalloc2
#   tcmalloc    LD_PRELOAD of Debian's libtcmalloc-minimal4
#   emclust     emclust's own setting (the default; listed to compare)
set -euo pipefail

models=mlp,mnist
objective_cnn=twofold
steps=12
warmup=3
emclust=./emclust
while [ $# -gt 0 ]; do
	case $1 in
	--models) models=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--emclust) emclust=$2; shift 2 ;;
	*) echo "allocators.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -x /usr/bin/time ] || { echo "allocators.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
libdir=/usr/lib/x86_64-linux-gnu
configs=(default glibc-env emclust)
[ -e $libdir/libjemalloc.so.2 ] && configs+=(jemalloc) || echo "allocators.sh: no jemalloc (apt-get install libjemalloc2)" >&2
[ -e $libdir/libtcmalloc_minimal.so.4 ] && configs+=(tcmalloc) || echo "allocators.sh: no tcmalloc (apt-get install libtcmalloc-minimal4)" >&2

# run CONFIG MODEL STEPS: prints "ms_per_step minflt maxrss_kb".
run() {
	local env=(env) obj=()
	case $1 in
	default) env+=(EMCLUST_MALLOC=default) ;;
	glibc-env) env+=(EMCLUST_MALLOC=default MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000) ;;
	jemalloc) env+=(EMCLUST_MALLOC=default LD_PRELOAD=$libdir/libjemalloc.so.2) ;;
	tcmalloc) env+=(EMCLUST_MALLOC=default LD_PRELOAD=$libdir/libtcmalloc_minimal.so.4) ;;
	esac
	[ "$2" = mlp ] || obj=(--objective $objective_cnn)
	local tf
	tf=$(mktemp)
	local json
	json=$("${env[@]}" /usr/bin/time -o "$tf" -f '%R %M' "$emclust" bench --device cpu --model "$2" "${obj[@]}" \
		--steps "$3" --warmup "$warmup" --json)
	echo "$(echo "$json" | python3 -c 'import json,sys; print("%.2f" % json.loads(sys.stdin.readline())["ms_per_step"])') $(tail -1 "$tf")"
	rm -f "$tf"
}

echo "| model | allocator | ms/step | faults/step | peak RSS MiB |"
echo "|---|---|---:|---:|---:|"
IFS=, read -ra ms <<<"$models"
for m in "${ms[@]}"; do
	for c in "${configs[@]}"; do
		read -r _ f2 _ < <(run "$c" "$m" 2)
		read -r ms_step fN rss < <(run "$c" "$m" "$steps")
		echo "| $m | $c | $ms_step | $(((fN - f2) / (steps - 2))) | $((rss / 1024)) |"
	done
done
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $("$emclust" devices | head -1)"
