# emclust: `make run` clusters the embedded digits, `make test` runs every check.
# Both install what is missing first (Debian 12 or newer, with apt-get: libtorch-dev
# 1.13+; Ubuntu 22.04's is 1.8, 24.04 has none, 26.04's is 2.9). Go too, where apt's
# golang-go is new enough (Ubuntu 26.04, Debian forky; Debian 12's is 1.19, 13's 1.24).

GO          ?= go
CXX         ?= g++
BUILD       := build
SHIM        := $(BUILD)/libemtorch.so
SHIM_SRC    := torch/csrc/emtorch.cpp torch/csrc/emtorch.h torch/csrc/emtorch.map
# Debian's libtorch-dev puts the C++ API headers here.
TORCH_INC   ?= /usr/include/torch/csrc/api/include
CXXFLAGS    ?= -O2
# C++20 where libtorch's ATen.h refuses anything older (Debian forky's 2.14), else C++17;
# decided when the shim is built, after deps has installed libtorch.
SHIM_STD     = $(if $(shell grep -s '__cplusplus < 202002L' /usr/include/ATen/ATen.h),c++20,c++17)
SHIM_FLAGS   = -std=$(SHIM_STD) -fPIC -shared -fno-math-errno -ffp-contract=off -Wall -Wno-unused-parameter -DUSE_C10D_GLOO -DEMTORCH_GLOO
# libopenblas0-pthread: Debian's libtorch calls libblas.so.3 for its matrix products,
# and without OpenBLAS that is the reference BLAS, 1.7x slower per step (RESULTS §10).
# libgloo-dev: the headers of Gloo, c10d's CPU backend for multi-process training
# (libtorch-dev ships c10d's headers but does not depend on Gloo's).
DEB_PKGS    := libtorch-dev libgloo-dev libopenblas0-pthread g++ python3 dataset-fashion-mnist
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Waits out the dpkg lock a new VM's unattended upgrades hold, and retries downloads.
APT         := env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5
GO_MIN      := 1.25

# CUDA shim: make cuda-lib LIBTORCH=/path/to/site-packages/torch (see scripts/build-shim.sh)
LIBTORCH    ?=

.PHONY: all deps bench-deps lib build test vet fmt-check run bench cuda-lib test-libtorch2 cuda-check gpu-bundle gpu-pack gpu-pack-lean gpu-acceptance-cpu clean

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${db:Status-Status}\n' $$p 2>/dev/null | grep -qx installed || missing="$$missing $$p"; done; \
	updated=; update() { [ -n "$$updated" ] || $(SUDO) $(APT) update -q || { echo "make deps: apt-get update failed (see above)"; exit 1; }; updated=1; }; \
	goapt() { LC_ALL=C apt-cache policy golang-go 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)'; }; \
	if [ -n "$$missing" ]; then update; fi; \
	if ! command -v $(GO) >/dev/null; then \
		c=$$(goapt) || { update; c=$$(goapt); }; \
		if [ -n "$$c" ] && dpkg --compare-versions "$$c" ge 2:$(GO_MIN)~; then missing="$$missing golang-go"; \
		else echo "make deps: Go $(GO_MIN) or newer is needed (https://go.dev/dl); this system's golang-go$${c:+ ($$c)} is older"; exit 1; fi; \
	fi; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing$$missing"; \
		$(SUDO) $(APT) install -y -q --no-install-recommends $$missing || { \
		echo "make deps: apt-get could not install$$missing; emclust needs Debian 12 (bookworm) or newer, whose libtorch-dev is 1.13 or later"; exit 1; }; \
	fi
	@v=$$(dpkg-query -W -f='$${Version}\n' libtorch-dev | head -1); dpkg --compare-versions "$$v" ge 1.13 || { \
		echo "make deps: libtorch-dev $$v is older than 1.13, which the shim needs (Debian 12 or newer has it)"; exit 1; }
	@v=$$($(GO) env GOVERSION | sed 's/^go//'); \
	if [ "$$(printf '%s\n' $(GO_MIN) $$v | sort -V | head -1)" != "$(GO_MIN)" ]; then \
		echo "make deps: Go $$v is older than $(GO_MIN)"; exit 1; fi

# The Python peers of scripts/bench (reference.py, compare.sh): Debian's PyTorch.
bench-deps: deps
	@dpkg-query -W -f='$${db:Status-Status}\n' python3-torch 2>/dev/null | grep -qx installed || { $(SUDO) $(APT) update -q && \
		$(SUDO) $(APT) install -y -q --no-install-recommends python3-torch; }

lib: $(SHIM)

$(SHIM): $(SHIM_SRC) | deps
	@mkdir -p $(BUILD)
	$(CXX) $(SHIM_FLAGS) $(CXXFLAGS) -I$(TORCH_INC) torch/csrc/emtorch.cpp -o $@ \
		-Wl,--version-script=torch/csrc/emtorch.map -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10

# emclust --version names the commit. Go's own VCS stamp is off: it fails where git
# refuses the checkout's owner (sudo, a container's bind mount).
COMMIT       = $(shell git describe --always --dirty 2>/dev/null)

build: lib
	$(GO) build -buildvcs=false -ldflags "-X emclust/command.commit=$(COMMIT)" -o emclust ./cmd/emclust

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: lib
	$(GO) vet ./...

# bench-deps: Debian's python3-torch, for torchrun in the launch tests and the Python peers.
test: deps bench-deps lib fmt-check vet
	$(GO) test -count=1 -timeout 40m ./...

run: build
	./emclust train --out runs/digits-$$(date +%Y%m%d-%H%M%S)

bench: build
	./emclust bench --model mlp,mnist,cifar,stl10 --device auto

cuda-lib:
	@[ -n "$(LIBTORCH)" ] || { echo "give LIBTORCH=<folder with include/ and lib/>, e.g. a PyTorch install's torch/"; exit 1; }
	scripts/build-shim.sh "$(LIBTORCH)" $(BUILD)/cuda

# What a GPU machine without Go needs besides the repository: the binary and the test
# binaries (scripts/gpu-acceptance.sh runs them there).
gpu-bundle: build
	@rm -rf $(BUILD)/tests && mkdir -p $(BUILD)/tests
	$(GO) test -c -o $(BUILD)/tests/ ./...

# gpu-bundle as one file to copy: the binaries stripped and xz-compressed (about
# 150 MB to 30 MB), with Debian's Fashion-MNIST as raw IDX files in build/fmnist (31 MB
# of gzip to 27 MB of xz), since the device machine has neither. The whole stays under
# the device tool's 64 MiB carry. scripts/gpu-acceptance.sh unpacks it over missing or
# older binaries.
# Gloo's headers go along for the shim's Gloo backend there, as a pip PyTorch ships
# none (scripts/gpu-setup.sh finds them): Debian trixie's, as sections 43 and 51 of
# docs/RESULTS.md built with, from make test-libtorch2's root where it is (its cache,
# as scripts/libtorch2.sh finds it), else this machine's.
FMNIST      ?= /usr/share/datasets/fashion-mnist
EMCLUST_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/emclust
GLOO_HEADERS ?= $(firstword $(wildcard $(EMCLUST_CACHE)/trixie/usr/include/gloo) /usr/include/gloo)
gpu-pack: gpu-bundle
	$(call pack,emclust build/tests build/fmnist build/gloo-include)

# pack FILES: build/gpu-bundle.tar.xz of the binary, the test binaries where FILES
# name build/tests, the data and Gloo's headers.
define pack
	rm -rf $(BUILD)/pack && mkdir -p $(BUILD)/pack/build/fmnist $(BUILD)/pack/build/gloo-include
	cp -r $(GLOO_HEADERS) $(BUILD)/pack/build/gloo-include/gloo
	cp emclust $(BUILD)/pack/ && strip $(BUILD)/pack/emclust
	$(if $(findstring build/tests,$(1)),mkdir -p $(BUILD)/pack/build/tests && cp $(BUILD)/tests/*.test $(BUILD)/pack/build/tests/ && strip $(BUILD)/pack/build/tests/*.test)
	for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do \
		gzip -dc $(FMNIST)/$$f.gz >$(BUILD)/pack/build/fmnist/$$f || exit 1; done
	XZ_OPT=-T0 tar -C $(BUILD)/pack -cJf $(BUILD)/gpu-bundle.tar.xz $(1)
	rm -rf $(BUILD)/pack
	@ls -l $(BUILD)/gpu-bundle.tar.xz | awk '{ printf "gpu-pack: %s, %.1f MiB (the carry takes 64)\n", $$NF, $$5 / 1048576 }'
endef

# gpu-pack without the test binaries, for a lend that goes on with a default run
# (scripts/gpu-acceptance.sh --only default --default-from DIR): the carry's 64 MiB
# then hold the run's parts beside the binary and the data.
gpu-pack-lean: build
	$(call pack,emclust build/fmnist build/gloo-include)

# scripts/gpu-acceptance.sh on the CPU, quick: the script itself, under CI. Then its
# default step twice, the second going on with the run the first packed into parts,
# as two lends would: the second must add epochs.
gpu-acceptance-cpu: gpu-bundle bench-deps
	rm -rf $(BUILD)/acceptance-cpu $(BUILD)/acceptance-cpu.tar.xz
	scripts/gpu-acceptance.sh --device cpu --quick --archive $(BUILD)/acceptance-cpu.tar.xz $(BUILD)/acceptance-cpu
	tar tJf $(BUILD)/acceptance-cpu.tar.xz | grep -q '^acceptance-cpu/results.json$$'
	! tar tJf $(BUILD)/acceptance-cpu.tar.xz | grep -q 'safetensors$$'
	rm -rf $(BUILD)/acceptance-default-1 $(BUILD)/acceptance-default-2 $(BUILD)/default-parts-1 $(BUILD)/default-parts-2
	scripts/gpu-acceptance.sh --device cpu --quick --only default --minutes 1.5 --default-to $(BUILD)/default-parts-1 $(BUILD)/acceptance-default-1
	scripts/gpu-acceptance.sh --device cpu --quick --only default --minutes 1.5 --default-from $(BUILD)/default-parts-1 \
		--default-to $(BUILD)/default-parts-2 $(BUILD)/acceptance-default-2
	@# Progress: the trials' epochs, or past them 1000 + the kept run's (its metrics.jsonl
	@# is written when the trials end, and the trials' folder removed).
	@for i in 1 2; do r=$(BUILD)/acceptance-default-$$i/default-run; \
		if [ -f $$r/metrics.jsonl ]; then echo $$((1000 + $$(wc -l <$$r/metrics.jsonl))); \
		else cat $$r/trials/seed-*/metrics.jsonl 2>/dev/null | wc -l; fi; done | \
		{ read a; read b; echo "gpu-acceptance-cpu: the default run's progress, first lend $$a, second $$b (epochs; 1000 + the kept run's past the trials)"; \
		[ $$a -ge 1 ] && [ $$b -gt $$a ]; }
	rm -rf $(BUILD)/default-parts-1 $(BUILD)/default-parts-2

# The whole test suite against libtorch 2.6, CPU and CUDA builds, in a Debian trixie
# root cached in ~/.cache/emclust (scripts/libtorch2.sh; needs root).
# The Go binaries are built on this machine and link the 1.13 shim (lib), which the
# 2.6 one replaces on LD_LIBRARY_PATH in the root.
# DEBIAN_SUITE=forky: the same against Debian testing's libtorch (2.14.1 on 2026-11-29).
DEBIAN_SUITE ?= trixie
test-libtorch2: lib
	$(SUDO) env PATH="$$PATH" EMCLUST_CACHE="$(EMCLUST_CACHE)" DEBIAN_SUITE="$(DEBIAN_SUITE)" scripts/libtorch2.sh cpu

cuda-check: lib
	$(SUDO) env PATH="$$PATH" EMCLUST_CACHE="$(EMCLUST_CACHE)" scripts/libtorch2.sh cuda

clean:
	rm -rf $(BUILD) emclust
