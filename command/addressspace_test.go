package command

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"emclust/sysmem"
)

// Under an address-space limit (ulimit -v, Grid Engine's h_vmem) emclust trains what
// fits, and refuses in one line what does not, naming the limit where it is the one
// that binds. Without the BLAS's buffers taken at start, a product past the limit
// left OpenBLAS retrying forever, and Go's allocator ended the process with a trace.
func TestAddressSpaceLimit(t *testing.T) {
	dir := t.TempDir()
	// libtorch, OpenBLAS (a 128 MB buffer a thread), glibc's arenas and Go reserve
	// about 2.5 GB of address space on two CPUs before any work, and a CUDA build's
	// libraries several more: this test binary, which links the same, says how much.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var vmKB uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			vmKB, _ = strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
		}
	}
	if vmKB == 0 {
		t.Fatalf("no VmSize in /proc/self/status")
	}
	limit := vmKB<<10 + uint64(3<<30) + uint64(runtime.NumCPU())*(256<<20)
	if set, _, ok := sysmem.AddressSpace(); ok {
		limit = min(limit, set) // one set already (Grid Engine's h_vmem) binds the shell too
	}
	under := func(args ...string) result {
		sh := fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, limit>>10)
		return runProgram("/bin/sh", dir, nil, slowWait, append([]string{"-c", sh, bin}, args...)...)
	}

	// Where the limit leaves less than the memory free, each command warns of it
	// first: surely where the limit itself is less. (The child's own reserve decides
	// where it is a little more.)
	free, ok := sysmem.Free().Bytes()
	binds := false
	warned := func(r result) result {
		t.Helper()
		first, rest, _ := strings.Cut(r.stderr, "\n")
		binds = strings.Contains(first, "emclust: warning: the address space is limited to")
		if ok && free > limit && !binds {
			t.Errorf("a limit of %d below the %d free, and no warning first on stderr: %q", limit, free, first)
		}
		if binds {
			r.stderr = rest
		}
		return r
	}

	r := warned(under("train", "--quiet", "--epochs", "2", "--restarts", "2", "--out", "small"))
	wantScoreLine(t, r)

	// 3.2 G weights: 51 GB to train, past any such limit.
	t.Logf("under a limit of %.3g GB (this binary's VmSize %.3g GB)", float64(limit)/1e9, float64(vmKB<<10)/1e9)
	r = warned(under("train", "--quiet", "--hidden", "40000,40000,40000", "--restarts", "1", "--out", "wide"))
	if binds {
		wantError(t, r, 2, "--hidden: the network mlp 64→40000→40000→40000→10", "address space left under its limit of", "(ulimit -v)", "raise the address-space limit")
	} else {
		// The memory binds, at least as the run started.
		wantError(t, r, 2, "--hidden: the network mlp 64→40000→40000→40000→10", "more than the")
	}
	if _, err := os.Stat(dir + "/wide"); !os.IsNotExist(err) {
		t.Errorf("a refused run left its folder: %v", err)
	}
	if strings.Contains(r.stderr, "no-memory-check") && strings.Contains(r.stderr, "ulimit") {
		t.Errorf("under the limit, --no-memory-check cannot help: %s", r.stderr)
	}
}
