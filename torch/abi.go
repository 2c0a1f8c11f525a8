package torch

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include "csrc/emtorch.h"

// loaded_shim describes the libemtorch.so this process loaded, looking every symbol
// up by name: a shim built before the handshake has no et_abi_version, and a call
// through the linker's lazy binding would end the process with "symbol lookup error".
// abi is 0 for such a shim.
static void loaded_shim(int *abi, const char **path, const char **version) {
	void *h = dlopen("libemtorch.so", RTLD_LAZY | RTLD_NOLOAD);
	void *where = h ? h : RTLD_DEFAULT;
	*abi = 0;
	*path = "libemtorch.so";
	*version = "unknown";
	struct link_map *lm = NULL;
	if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
		*path = lm->l_name;
	int (*abi_fn)(void) = (int (*)(void))dlsym(where, "et_abi_version");
	if (abi_fn) *abi = abi_fn();
	const char *(*version_fn)(void) = (const char *(*)(void))dlsym(where, "et_version");
	if (version_fn) *version = version_fn();
	// The handle only names an object that stays loaded; closing drops the count
	// dlopen added.
	if (h) dlclose(h);
}
*/
import "C"

import (
	"fmt"
	"sync"
)

// ABIVersion is the emtorch ABI this binding was compiled against (emtorch.h).
const ABIVersion = int(C.ET_ABI_VERSION)

var abiCheck = sync.OnceValue(checkABI)

// CheckABI reports whether the loaded libemtorch.so speaks this binding's ABI. The Go
// binary and the shim are built apart and paired at run time (LD_LIBRARY_PATH), so a
// shim from another commit could otherwise run the wrong op for an enum value. Every
// Scope starts with this error, so no op reaches a mismatched shim; commands call it
// first to fail before any work.
func CheckABI() error { return abiCheck() }

func checkABI() error {
	var abi C.int
	var path, version *C.char
	C.loaded_shim(&abi, &path, &version)
	where := fmt.Sprintf("%s (libtorch %s)", C.GoString(path), C.GoString(version))
	const fix = "build the binary and the shim from one commit (make build, or scripts/build-shim.sh)"
	switch {
	case abi == 0:
		return fmt.Errorf("%s has no emtorch ABI version (it predates ABI 1), but this emclust needs ABI %d: %s",
			where, ABIVersion, fix)
	case int(abi) != ABIVersion:
		return fmt.Errorf("%s is emtorch ABI %d, but this emclust needs ABI %d: %s", where, int(abi), ABIVersion, fix)
	}
	if err := handshake(ABIVersion); err != nil {
		return fmt.Errorf("%s: %w: %s", where, err, fix)
	}
	return nil
}

// handshake is the shim's side of the check.
func handshake(callerABI int) error { return check("handshake", C.et_handshake(C.int(callerABI))) }
