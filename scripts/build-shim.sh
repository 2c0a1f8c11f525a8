#!/usr/bin/env bash
# build-shim.sh LIBTORCH [OUTDIR]
#
# Builds the emtorch shim (torch/csrc) against a libtorch folder that has include/ and
# lib/: a PyTorch install's torch/ package folder, or the official libtorch archive.
# With libtorch_cuda in it, the shim is the CUDA build. Needs only g++ (no Go), so a GPU
# machine with PyTorch but no Go can run it; the Go binary built elsewhere then runs
# with LD_LIBRARY_PATH=OUTDIR.
#
#   scripts/build-shim.sh "$(python3 -c 'import torch,os; print(os.path.dirname(torch.__file__))')" build/cuda
set -euo pipefail

LIBTORCH=${1:?usage: build-shim.sh LIBTORCH [OUTDIR]}
OUT=${2:-build/cuda}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CXX=${CXX:-g++}

[ -d "$LIBTORCH/include" ] && [ -d "$LIBTORCH/lib" ] || {
  echo "build-shim: $LIBTORCH has no include/ and lib/ (want a PyTorch torch/ folder or a libtorch archive)" >&2; exit 1; }

# The C++ ABI must match libtorch's: PyTorch says which; otherwise read it off libc10's symbols.
if [ -z "${CXX11_ABI:-}" ]; then
  if CXX11_ABI=$(cd /tmp && python3 -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))' 2>/dev/null); then :;
  elif [ "$(nm -DC "$LIBTORCH/lib/libc10.so" 2>/dev/null | grep -c '__cxx11::basic_string')" != 0 ]; then CXX11_ABI=1;
  else CXX11_ABI=0; fi
fi

defs=(-D_GLIBCXX_USE_CXX11_ABI="$CXX11_ABI")
# The C++ standard: C++20 where libtorch's ATen.h refuses anything older (Debian
# forky's 2.14), else C++17 (Debian 12's 1.13, trixie's 2.6).
std=c++17
if grep -qs '__cplusplus < 202002L' "$LIBTORCH/include/ATen/ATen.h"; then std=c++20; fi
libs=(-ltorch -ltorch_cpu -lc10)
# -isystem: warnings in libtorch's own headers (g++ 14 finds some in 2.x) are not ours.
# /usr/include is one already, and naming it again breaks libstdc++'s #include_next.
incs=(-isystem "$LIBTORCH/include/torch/csrc/api/include")
[ "$(realpath "$LIBTORCH/include")" = /usr/include ] || incs=(-isystem "$LIBTORCH/include" "${incs[@]}")
if [ -e "$LIBTORCH/lib/libtorch_cuda.so" ]; then
  # Without --no-as-needed the linker drops libtorch_cuda (nothing names its symbols)
  # and CUDA is silently unavailable at run time.
  libs=(-ltorch_cuda -lc10_cuda "${libs[@]}")
  # cuda_runtime_api.h: from CUDA_HOME, the system toolkit, or PyTorch's pip wheels
  # (nvidia/cuda_runtime/ up to CUDA 12, nvidia/cu13/ from CUDA 13).
  cuda_inc=""
  for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include \
           "$LIBTORCH"/../nvidia/cuda_runtime/include "$LIBTORCH"/../nvidia/cu*/include /usr/include; do
    if [ -e "$d/cuda_runtime_api.h" ]; then cuda_inc=$d; break; fi
  done
  if [ -n "$cuda_inc" ]; then
    defs+=(-DEMTORCH_CUDA)
    [ "$(realpath "$cuda_inc")" = /usr/include ] || incs+=(-isystem "$cuda_inc")
    cudart=$(ls "$cuda_inc"/../lib/libcudart.so* "$cuda_inc"/../lib64/libcudart.so* "$LIBTORCH"/lib/libcudart.so* 2>/dev/null | head -1 || true)
    if [ -n "$cudart" ]; then libs+=(-L"$(dirname "$cudart")" -l:"$(basename "$cudart")" -Wl,-rpath,"$(dirname "$cudart")"); else libs+=(-lcudart); fi
  else
    echo "build-shim: no cuda_runtime_api.h found: CUDA tensors work, but device names, peak memory and explicit sync fall back" >&2
  fi
fi

# Multi-process training: c10d's Gloo backend needs Gloo's headers (Debian's
# libgloo-dev, a libtorch folder that ships include/gloo, or GLOO_INCLUDE=DIR with
# DIR/gloo/config.h: a pip PyTorch ships none, though its libtorch has Gloo inside),
# NCCL's needs nccl.h (PyTorch's nvidia/nccl wheel, or the system's). Each is tried,
# and left out with a warning if this libtorch cannot build it.
dist=()
for d in "${GLOO_INCLUDE:-/nonexistent}" "$LIBTORCH/include" /usr/include; do
  if [ -e "$d/gloo/config.h" ]; then
    dist+=(-DUSE_C10D_GLOO -DEMTORCH_GLOO)
    case $(realpath "$d") in /usr/include | "$(realpath "$LIBTORCH/include")") ;; *) incs+=(-isystem "$d") ;; esac
    break
  fi
done
if [ -e "$LIBTORCH/lib/libtorch_cuda.so" ]; then
  for d in "$LIBTORCH"/../nvidia/nccl/include "${CUDA_HOME:-/nonexistent}/include" /usr/include; do
    if [ -e "$d/nccl.h" ]; then
      dist+=(-DUSE_C10D_NCCL -DEMTORCH_NCCL)
      [ "$(realpath "$d")" = /usr/include ] || incs+=(-isystem "$d")
      break
    fi
  done
fi

mkdir -p "$OUT"
build() {
  "$CXX" -std=$std -O2 -fPIC -shared -fno-math-errno -ffp-contract=off -Wall -Wno-unused-parameter "${defs[@]}" "$@" "${incs[@]}" \
    "$HERE/torch/csrc/emtorch.cpp" -o "$OUT/libemtorch.so" -Wl,--version-script="$HERE/torch/csrc/emtorch.map" \
    -L"$LIBTORCH/lib" -Wl,--no-as-needed "${libs[@]}" -Wl,--as-needed -Wl,-rpath,"$LIBTORCH/lib"
}
echo "build-shim: $LIBTORCH ($std, cxx11 abi $CXX11_ABI${dist[*]:+, ${dist[*]}}) -> $OUT/libemtorch.so"
if ! build "${dist[@]}" 2>"$OUT/build.log"; then
  if [ ${#dist[@]} = 0 ]; then cat "$OUT/build.log" >&2; exit 1; fi
  mv "$OUT/build.log" "$OUT/build-dist.log"
  # Each backend alone, then none: say what was left out.
  gloo=(); [[ " ${dist[*]} " == *" -DEMTORCH_GLOO "* ]] && gloo=(-DUSE_C10D_GLOO -DEMTORCH_GLOO)
  nccl=(); [[ " ${dist[*]} " == *" -DEMTORCH_NCCL "* ]] && nccl=(-DUSE_C10D_NCCL -DEMTORCH_NCCL)
  if [ ${#gloo[@]} != 0 ] && [ ${#nccl[@]} != 0 ] && build "${gloo[@]}" 2>"$OUT/build.log"; then
    echo "build-shim: built without NCCL (its c10d headers did not compile here: $OUT/build-dist.log has why)" >&2
  elif [ ${#gloo[@]} != 0 ] && [ ${#nccl[@]} != 0 ] && build "${nccl[@]}" 2>"$OUT/build.log"; then
    echo "build-shim: built without Gloo (its c10d headers did not compile here: $OUT/build-dist.log has why)" >&2
  else
    build
    echo "build-shim: built without Gloo or NCCL: multi-process training is off (see $OUT/build-dist.log)" >&2
  fi
fi
echo "build-shim: run with LD_LIBRARY_PATH=$OUT:\$LD_LIBRARY_PATH ./emclust devices"
