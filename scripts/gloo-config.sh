#!/usr/bin/env bash
# gloo-config.sh GLOO_SRC: writes GLOO_SRC/gloo/config.h from its config.h.in, as
# PyTorch's Linux CUDA build configures the Gloo it links into libtorch (CMake's
# configure_file: CUDA, NCCL and the TCP transports on, the rest off). The official
# libtorch archive ships no Gloo headers (PyTorch builds Gloo with GLOO_INSTALL off),
# and the shim's Gloo backend needs them from the commit that libtorch vendors:
# Dockerfile.cuda fetches that commit, then runs this. The shim includes none of the
# headers these switches change; the version numbers are Gloo's CMakeLists.txt's.
set -euo pipefail
src=${1:?usage: gloo-config.sh GLOO_SRC}
in=$src/gloo/config.h.in
[ -f "$in" ] || { echo "gloo-config: no $in" >&2; exit 1; }
version() { sed -n "s/^set(GLOO_VERSION_$1 \([0-9]*\))/\1/p" "$src/CMakeLists.txt" | head -1; }
major=$(version MAJOR) minor=$(version MINOR) patch=$(version PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || { echo "gloo-config: no set(GLOO_VERSION_...) in $src/CMakeLists.txt" >&2; exit 1; }
sed -E \
	-e "s/@GLOO_VERSION_MAJOR@/$major/; s/@GLOO_VERSION_MINOR@/$minor/; s/@GLOO_VERSION_PATCH@/$patch/" \
	-e 's/^#cmakedefine01 (GLOO_USE_CUDA|GLOO_USE_NCCL|GLOO_HAVE_TRANSPORT_TCP|GLOO_HAVE_TRANSPORT_TCP_TLS)$/#define \1 1/' \
	-e 's/^#cmakedefine01 ([A-Z0-9_]+)$/#define \1 0/' \
	"$in" >"$src/gloo/config.h.tmp"
if grep -q '@\|cmakedefine' "$src/gloo/config.h.tmp"; then
	echo "gloo-config: $in has entries this script does not know:" >&2
	grep '@\|cmakedefine' "$src/gloo/config.h.tmp" >&2
	rm -f "$src/gloo/config.h.tmp"
	exit 1
fi
mv "$src/gloo/config.h.tmp" "$src/gloo/config.h"
echo "gloo-config: $src/gloo/config.h (Gloo $major.$minor.$patch)"
