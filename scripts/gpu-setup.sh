#!/usr/bin/env bash
# gpu-setup.sh: on a GPU machine that has PyTorch but no Go, build the CUDA shim against
# that PyTorch's libtorch and check that the emclust binary (built elsewhere with
# `make build` and carried over) sees the GPU.
#
#   scripts/gpu-setup.sh            # builds build/cuda/libemtorch.so
#   LD_LIBRARY_PATH=build/cuda ./emclust devices
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_DIR=$(cd /tmp && "$PY" -c 'import torch,os; print(os.path.dirname(torch.__file__))')
ABI=$(cd /tmp && "$PY" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')
# Gloo's headers, which a pip PyTorch lacks: make gpu-pack carries them.
if [ -z "${GLOO_INCLUDE:-}" ] && [ -e build/gloo-include/gloo/config.h ]; then
  export GLOO_INCLUDE=$PWD/build/gloo-include
fi
echo "gpu-setup: PyTorch $(cd /tmp && "$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)') at $TORCH_DIR"
CXX11_ABI=$ABI scripts/build-shim.sh "$TORCH_DIR" build/cuda
if [ -x ./emclust ]; then
  LD_LIBRARY_PATH="$PWD/build/cuda:$TORCH_DIR/lib:${LD_LIBRARY_PATH:-}" ./emclust devices
fi
