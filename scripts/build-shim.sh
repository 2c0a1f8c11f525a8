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

mkdir -p "$OUT"
echo "build-shim: $LIBTORCH (cxx11 abi $CXX11_ABI) -> $OUT/libemtorch.so"
"$CXX" -std=c++17 -O2 -fPIC -shared -Wall -Wno-unused-parameter "${defs[@]}" "${incs[@]}" \
  "$HERE/torch/csrc/emtorch.cpp" -o "$OUT/libemtorch.so" \
  -L"$LIBTORCH/lib" -Wl,--no-as-needed "${libs[@]}" -Wl,--as-needed -Wl,-rpath,"$LIBTORCH/lib"
echo "build-shim: run with LD_LIBRARY_PATH=$OUT:\$LD_LIBRARY_PATH ./emclust devices"
