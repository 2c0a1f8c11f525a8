#!/usr/bin/env bash
# libtorch2.sh cpu|cuda: run the whole Go test suite against Debian trixie's libtorch 2.6
# on this CPU-only machine (`make test-libtorch2`, `make cuda-check`).
#
#   cpu   the shim built against libtorch 2.6 (CPU).
#   cuda  the shim built with EMTORCH_CUDA against libtorch-cuda 2.6 and the CUDA 12.4
#         headers, linked against libtorch_cuda; `emclust devices` must say the build
#         has CUDA and that no device is present, and --device cuda must fail in one line.
#
# libtorch 2.6 needs trixie's glibc, so the tests run in a trixie root made by
# debootstrap from Debian's packages and cached outside the repository
# ($EMCLUST_CACHE, default ~/.cache/emclust). The Go binary and the test binaries are
# built here, with the host's Go; in the root they find the 2.6 shim first on
# LD_LIBRARY_PATH. Needs root (debootstrap, chroot, a private mount namespace).
# DEBIAN_SUITE=forky (default trixie) makes and uses another suite's root instead,
# $EMCLUST_CACHE/forky, to run the suite against that suite's libtorch.
#
# The CUDA flavour is unpacked, not installed, into the root's /opt/libtorch-cuda:
# libtorch-cuda-2.6 conflicts with the CPU libtorch2.6, and its dependencies include
# nvidia-cudnn, which downloads cuDNN from NVIDIA at install time. Debian ships no
# cuDNN, so the root gets a generated stand-in libcudnn.so.9 whose every function
# fails (as the CUDA toolkit's stubs/libcuda.so does for the driver): without a GPU
# nothing calls it. Of nvidia-cuda-dev (0.9 GB) only the ten headers the shim includes
# are kept.
set -euo pipefail

MODE=${1:?usage: libtorch2.sh cpu|cuda}
case $MODE in cpu | cuda) ;; *) echo "libtorch2.sh: mode $MODE: want cpu or cuda" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "libtorch2.sh: needs root (debootstrap, chroot, mount); run it with sudo" >&2; exit 1; }
unshare --mount --propagation private true 2>/dev/null || {
  echo "libtorch2.sh: cannot make a mount namespace here (unshare --mount): an unprivileged container lacks CAP_SYS_ADMIN; run it on the host, or in a --privileged container" >&2; exit 1; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${EMCLUST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/emclust}
SUITE=${DEBIAN_SUITE:-trixie}
if [ "$MODE" = cuda ] && [ "$SUITE" != trixie ]; then
  echo "libtorch2.sh: cuda: DEBIAN_SUITE $SUITE: the CUDA flavour is trixie's libtorch-cuda 2.6 alone" >&2; exit 2
fi
ROOT=$CACHE/$SUITE
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
GO=${GO:-go}
OUT=$REPO/build/libtorch2-$MODE
start=$SECONDS

say() { echo "libtorch2 [$MODE, $((SECONDS - start)) s]: $*"; }

# in_root runs a command in the root, with /proc, /sys, /dev and the repository
# (at its own path) mounted in a private mount namespace that ends with the command.
in_root() {
  unshare --mount --propagation private /bin/sh -euc '
    root=$1 repo=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mkdir -p "$root$repo"
    mount --bind "$repo" "$root$repo"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp LANG=C.UTF-8 "$@"
  ' sh "$ROOT" "$REPO" "$@"
}

# --- the trixie root, with libtorch 2.6 (CPU), Gloo's headers, g++, torchrun, Fashion-MNIST
ROOT_PKGS=libtorch-dev,libgloo-dev,g++,binutils,python3,python3-torch,dataset-fashion-mnist
if [ ! -e "$ROOT/.emclust-root" ]; then
  command -v debootstrap >/dev/null || {
    say "installing debootstrap"
    apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5 install -y -q --no-install-recommends debootstrap debian-archive-keyring
  }
  say "debootstrap $SUITE into $ROOT (about 1.5 GB; once per machine)"
  rm -rf "$ROOT.tmp"
  mkdir -p "$CACHE"
  # The sid script: every suite since squeeze uses it, and a host's debootstrap may
  # predate a newer suite's name (Debian 12's has no forky).
  debootstrap --variant=minbase --components=main,contrib,non-free --include=$ROOT_PKGS \
    "$SUITE" "$ROOT.tmp" "$MIRROR" sid >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log" >&2; echo "libtorch2.sh: debootstrap failed (log: $CACHE/debootstrap.log)" >&2; exit 1; }
  # The CPU flavour as a libtorch folder (include/, lib/), the layout build-shim.sh takes.
  mkdir -p "$ROOT.tmp/opt/libtorch-cpu"
  ln -s /usr/include "$ROOT.tmp/opt/libtorch-cpu/include"
  ln -s /usr/lib/x86_64-linux-gnu "$ROOT.tmp/opt/libtorch-cpu/lib"
  echo "$ROOT_PKGS" >"$ROOT.tmp/.emclust-root"
  rm -rf "$ROOT" && mv "$ROOT.tmp" "$ROOT"
fi
if [ "$(cat "$ROOT/.emclust-root")" != "$ROOT_PKGS" ]; then
  # A root cached by an older version of this script: add what it lacks.
  say "adding ${ROOT_PKGS//,/ } to the cached root"
  in_root /bin/sh -c "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${ROOT_PKGS//,/ } >/dev/null"
  echo "$ROOT_PKGS" >"$ROOT/.emclust-root"
fi
say "root: $(in_root dpkg-query -W -f '${Package} ${Version}' libtorch-dev)"

# --- the CUDA flavour, unpacked into /opt/libtorch-cuda --------------------------------
# libtorch_cuda's DT_NEEDED closure, less the driver (libcudart loads it when present).
CUDA_PKGS="libtorch-cuda-2.6 libtorch-cuda-dev libcudart12 libcublas12 libcublaslt12 libcufft11
  libcurand10 libcusparse12 libnvjitlink12 libnccl2 libnvtoolsext1 libgloo-cuda-0
  libtensorpipe-cuda-0 libhiredis1.1.0 libibverbs1 libuv1t64"
# The CUDA runtime headers the shim includes (g++ -H on emtorch.cpp with EMTORCH_CUDA).
CUDA_HEADERS="builtin_types.h crt/host_defines.h cuda.h cuda_device_runtime_api.h
  cuda_runtime_api.h device_types.h driver_types.h surface_types.h texture_types.h
  vector_types.h"
CUDA_LIBS=/opt/libtorch-cuda/lib:/opt/libtorch-cuda/usr/lib:/opt/libtorch-cuda/stub
if [ "$MODE" = cuda ] && [ ! -e "$ROOT/opt/libtorch-cuda/.complete" ]; then
  say "downloading libtorch-cuda 2.6 and its CUDA libraries (about 1.4 GB; once per machine)"
  debs=/var/cache/emclust-debs
  rm -rf "$ROOT/opt/libtorch-cuda" "$ROOT/opt/cuda" "$ROOT$debs"
  mkdir -p "$ROOT$debs" && chmod 777 "$ROOT$debs"
  in_root /bin/sh -c "apt-get update -q >/dev/null && cd $debs && apt-get download -q $(echo $CUDA_PKGS) nvidia-cuda-dev >/dev/null"
  p=$ROOT/opt/libtorch-cuda
  mkdir -p "$p/stub" "$ROOT/opt/cuda/include"
  for pkg in $CUDA_PKGS; do dpkg-deb -x "$ROOT$debs/${pkg}"_*.deb "$p"; done
  ln -s usr/include "$p/include"
  ln -s usr/lib/x86_64-linux-gnu "$p/lib"
  dpkg-deb --fsys-tarfile "$ROOT$debs"/nvidia-cuda-dev_*.deb |
    tar -x -C "$ROOT/opt/cuda" --strip-components=2 $(for h in $CUDA_HEADERS; do echo "./usr/include/$h"; done)
  rm -rf "$ROOT$debs"
  # The cuDNN stand-in: every cudnn* symbol libtorch_cuda binds, under the version
  # node libcudnn.so.9 it asks for.
  syms=$(nm -D --undefined-only "$p"/lib/libtorch_cuda.so.* | awk '$2 ~ /^cudnn/ { sub(/@.*/, "", $2); print $2 }' | sort -u)
  {
    echo "/* Generated by scripts/libtorch2.sh: a load-time stand-in for cuDNN. Every function fails. */"
    for s in $syms; do
      if [ "$s" = cudnnGetErrorString ]; then echo "const char *$s(int status) { return \"no cuDNN (stub)\"; }"
      else echo "int $s(void) { return 1; }"; fi
    done
  } >"$p/stub/cudnn_stub.c"
  { echo "libcudnn.so.9 { global:"; for s in $syms; do echo "  $s;"; done; echo "local: *; };"; } >"$p/stub/cudnn.map"
  in_root gcc -shared -fPIC -O1 -Wl,-soname,libcudnn.so.9 -Wl,--version-script=/opt/libtorch-cuda/stub/cudnn.map \
    /opt/libtorch-cuda/stub/cudnn_stub.c -o /opt/libtorch-cuda/stub/libcudnn.so.9
  touch "$p/.complete"
fi

# The NCCL backend is not compiled here: ProcessGroupNCCL needs the whole CUDA runtime
# headers, of which the root keeps ten. It is first compiled on a GPU machine, where
# build-shim.sh leaves it out, with a warning, if it does not compile.

# --- binaries: Go here, the shim in the root through build-shim.sh ---------------------
rm -rf "$OUT" && mkdir -p "$OUT/tests"
say "building emclust and the test binaries with $($GO env GOVERSION)"
(cd "$REPO" && $GO build -buildvcs=false -o "$OUT/emclust" ./cmd/emclust && $GO test -c -o "$OUT/tests/" ./...)
if [ "$MODE" = cuda ]; then
  in_root env CUDA_HOME=/opt/cuda CXX11_ABI=1 "$REPO/scripts/build-shim.sh" /opt/libtorch-cuda "$OUT/shim"
  libpath=$OUT/shim:$CUDA_LIBS
else
  in_root env CXX11_ABI=1 "$REPO/scripts/build-shim.sh" /opt/libtorch-cpu "$OUT/shim"
  libpath=$OUT/shim
fi
readelf -d "$OUT/shim/libemtorch.so" | grep -q "libtorch_cuda" && linked=libtorch_cuda || linked="no libtorch_cuda"
say "shim: $OUT/shim/libemtorch.so ($linked)"

# --- checks ---------------------------------------------------------------------------
failed=0
emclust() { in_root env LD_LIBRARY_PATH="$libpath" "$OUT/emclust" "$@"; }
devices=$(emclust devices)
echo "$devices" | sed 's/^/  devices: /'
if [ "$MODE" = cuda ]; then
  echo "$devices" | grep -q "CUDA build of the emtorch shim" || { echo "FAIL: devices does not report a CUDA build"; failed=1; }
  echo "$devices" | grep -q "no CUDA device" || { echo "FAIL: devices does not report that no CUDA device is present"; failed=1; }
  [ "$linked" = libtorch_cuda ] || { echo "FAIL: the shim is not linked against libtorch_cuda"; failed=1; }
  set +e
  err=$(emclust train --device cuda --epochs 1 --quiet --out /tmp/emclust-cuda-check 2>&1 >/dev/null)
  code=$?
  set -e
  echo "  --device cuda: exit $code: $err"
  if [ $code = 0 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || ! echo "$err" | grep -q "no CUDA device"; then
    echo "FAIL: --device cuda without a GPU must fail in one line"; failed=1
  fi
else
  echo "$devices" | grep -q "libtorch 2\." || { echo "FAIL: devices does not report libtorch 2.x"; failed=1; }
fi

say "running the Go test suite against $(echo "$devices" | head -1)"
while read -r path dir; do
  test_bin=$OUT/tests/$(basename "$path").test
  [ -x "$test_bin" ] || continue
  t0=$SECONDS
  if in_root /bin/sh -c "cd '$dir' && exec env LD_LIBRARY_PATH='$libpath' EMCLUST_TEST_BIN='$OUT/emclust' '$test_bin' -test.count=1 -test.timeout=30m" >"$OUT/$(basename "$path").log" 2>&1; then
    printf 'ok  \t%s\t%ds\n' "$path" $((SECONDS - t0))
  else
    grep -E -- "--- FAIL|^\s+\S+_test.go:[0-9]+:" "$OUT/$(basename "$path").log" | head -40
    printf 'FAIL\t%s\t%ds (log: %s)\n' "$path" $((SECONDS - t0)) "$OUT/$(basename "$path").log"
    failed=1
  fi
done < <(cd "$REPO" && $GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...)

if [ $failed != 0 ]; then say "FAILED"; exit 1; fi
say "PASS"
