// Package sysmem says how much memory this process may take, so that emclust can refuse
// work too large for it with a message. Linux hands out memory lazily: past what the
// machine (or the container, or the Slurm job) has, the kernel's OOM killer ends the
// process with SIGKILL and no word of why.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Total is the machine's physical memory in bytes, or its cgroup's limit where that
// is less; 1 TiB where neither is known.
func Total() int {
	total := uint64(1 << 40)
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil && si.Totalram != 0 {
		total = uint64(si.Totalram) * uint64(si.Unit)
	}
	if limit, _, ok := cgroup(); ok {
		total = min(total, limit)
	}
	return int(min(total, 1<<50))
}

// Room is the memory this process may still take, and which limit sets that figure,
// so that a message can name what to raise: where `free` shows gigabytes free, a
// refusal must say that a cgroup, the kernel's commit limit or `ulimit -v` binds.
type Room struct {
	// Shared is what the processes on this machine share: the memory free
	// (/proc/meminfo's MemAvailable, and the swap free for FreeWithSwap), or what
	// its cgroups or strict overcommit leave where that is less. SharedKnown is
	// false where none is read.
	Shared      uint64
	SharedKnown bool
	// SharedBy names what sets Shared.
	SharedBy Bound
	// Strict is set under strict overcommit (vm.overcommit_memory=2), where malloc
	// fails, as under `ulimit -v`, rather than the OOM killer ending the process.
	Strict bool
	// AddressLimit is this process's own limit on its address space (AddressSpace),
	// 0 where it has none, and AddressLeft what the limit leaves of it.
	AddressLimit, AddressLeft uint64
	withSwap                  bool
}

// Bound names the limit that sets a Room's Shared.
type Bound int

const (
	ByMemory Bound = iota // the memory (and swap) free
	ByCgroup              // what a cgroup's limit leaves
	ByCommit              // what the kernel's commit limit leaves, under strict overcommit
)

// Free is the memory this process may still take without swapping.
func Free() Room { return free(false) }

// FreeWithSwap is Free with the swap free besides: the most a process can be given
// at all, if it accepts to be swapped. Swap raises neither an address-space limit
// nor the commit limit, which counts it already.
func FreeWithSwap() Room { return free(true) }

func free(withSwap bool) Room {
	meminfo, _ := os.ReadFile("/proc/meminfo")
	mode, _ := os.ReadFile("/proc/sys/vm/overcommit_memory")
	_, left, limited := cgroup()
	r := shared(meminfo, cgroupLeft{left, limited}, strings.TrimSpace(string(mode)) == "2", withSwap)
	r.AddressLimit, r.AddressLeft, _ = AddressSpace()
	return r
}

// cgroupLeft is what this process's cgroups leave (cgroup), where one sets a limit.
type cgroupLeft struct {
	left    uint64
	limited bool
}

// shared is the Room that the text of /proc/meminfo (nil where unread) and the
// cgroups leave the machine's processes, under strict overcommit where strict is set.
func shared(meminfo []byte, cg cgroupLeft, strict, withSwap bool) Room {
	r := Room{withSwap: withSwap, Strict: strict}
	r.Shared, r.SharedKnown = memAvailable(meminfo)
	if cg.limited && (!r.SharedKnown || cg.left < r.Shared) {
		r.Shared, r.SharedKnown, r.SharedBy = cg.left, true, ByCgroup
	}
	if r.SharedKnown && withSwap {
		swap, _ := meminfoValue(meminfo, "SwapFree")
		r.Shared += swap
	}
	// Under strict overcommit, malloc fails, as under `ulimit -v`, once the
	// memory committed reaches the kernel's limit (swap and a ratio of the memory).
	if strict {
		limit, lok := meminfoValue(meminfo, "CommitLimit")
		committed, cok := meminfoValue(meminfo, "Committed_AS")
		if left := limit - min(committed, limit); lok && cok && (!r.SharedKnown || left < r.Shared) {
			r.Shared, r.SharedKnown, r.SharedBy = left, true, ByCommit
		}
	}
	return r
}

// Bytes is the figure: the least of the memory shared and the address space left.
// ok is false where neither is known.
func (r Room) Bytes() (free uint64, ok bool) {
	if r.AddressBinds() {
		return r.AddressLeft, true
	}
	return r.Shared, r.SharedKnown
}

// AddressBinds reports whether this process's address-space limit, rather than the
// memory shared, sets the figure.
func (r Room) AddressBinds() bool {
	return r.AddressLimit > 0 && (!r.SharedKnown || r.AddressLeft < r.Shared)
}

// Divided is the room of one of n processes on this machine: they share its memory,
// but each has an address-space limit of its own.
func (r Room) Divided(n int) Room {
	r.Shared /= uint64(max(n, 1))
	return r
}

// What names the figure of Bytes for a message.
func (r Room) What() string {
	switch {
	case r.AddressBinds():
		return fmt.Sprintf("address space left under its limit of %.3g GB (ulimit -v)", float64(r.AddressLimit)/1e9)
	case r.SharedBy == ByCommit:
		return "memory left to commit under strict overcommit (vm.overcommit_memory=2)"
	case r.SharedBy == ByCgroup && r.withSwap:
		return "memory left under its cgroup's limit and swap free"
	case r.SharedBy == ByCgroup:
		return "memory left under its cgroup's limit"
	case r.withSwap:
		return "memory and swap free"
	}
	return "memory free"
}

// AddressSpace is this process's limit on its virtual memory (RLIMIT_AS: what
// `ulimit -v` and Grid Engine's h_vmem set) and what of it is left, the limit less
// /proc/self/status's VmSize; ok is false where there is no limit. Where malloc
// meets it, it fails rather than the kernel's OOM killer ending the process, but Go's
// allocator then ends the process anyway, and OpenBLAS retries forever. The limit
// binds long before the memory in use reaches it: libtorch, glibc's per-thread
// arenas, OpenBLAS and Go reserve gigabytes of address space they never touch.
func AddressSpace() (limit, left uint64, ok bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err != nil || rl.Cur == rlimInfinity {
		return 0, 0, false
	}
	status, _ := os.ReadFile("/proc/self/status")
	return rl.Cur, addressLeft(rl.Cur, status), true
}

// rlimInfinity is RLIM_INFINITY, "no limit", on Linux.
const rlimInfinity = ^uint64(0)

// addressLeft is what limit leaves of the address space after the VmSize (kB) that the
// text of /proc/self/status gives; all of limit where it gives none.
func addressLeft(limit uint64, status []byte) uint64 {
	size, _ := meminfoValue(status, "VmSize")
	return limit - min(size, limit)
}

// memAvailable reads MemAvailable from the text of /proc/meminfo.
func memAvailable(meminfo []byte) (uint64, bool) { return meminfoValue(meminfo, "MemAvailable") }

// meminfoValue reads the entry key (in kB) from the text of /proc/meminfo, in bytes.
func meminfoValue(meminfo []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		name, rest, found := strings.Cut(sc.Text(), ":")
		if !found || name != key {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// cgroup reads the memory limits of this process's cgroup: the least of them, and the
// least that one leaves (a limit less its use). The hierarchy is walked from the
// folder /proc/self/cgroup names (a Slurm job's, a systemd unit's; in a container of
// its own namespace, the root) up to the root, since a parent's limit binds too:
// cgroup v2's, else v1's memory controller's. ok is false where none sets a limit;
// v1 writes "none" as a number near 2⁶³, above any machine's memory, which comes
// back as the limit.
func cgroup() (limit, left uint64, ok bool) {
	var v2, v1 string
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		v2, _ = v2Path(string(b))
		v1 = v1MemoryPath(string(b))
	}
	if limit, left, ok := walkLimits("/sys/fs/cgroup", v2, v2Files); ok {
		return limit, left, true
	}
	return walkLimits("/sys/fs/cgroup/memory", v1, v1Files)
}

// cgroupFiles names a cgroup version's files: the limit, the use, and the key in
// memory.stat of the file pages not recently used.
type cgroupFiles struct{ limit, use, inactiveFile string }

var (
	v2Files = cgroupFiles{"memory.max", "memory.current", "inactive_file"}
	v1Files = cgroupFiles{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"}
)

// walkLimits walks from root+path up to root, and returns the least limit and the
// least limit less use among the folders that set one. A path the mount does not
// show (a container's view) finds its nearest shown parent.
func walkLimits(root, path string, f cgroupFiles) (limit, left uint64, ok bool) {
	dir := filepath.Join(root, path)
	for {
		if l, lf, found := limitsIn(dir, f.limit, f.use, f.inactiveFile); found {
			if !ok || l < limit {
				limit = l
			}
			if !ok || lf < left {
				left = lf
			}
			ok = true
		}
		if dir == root || !strings.HasPrefix(dir, root) {
			return limit, left, ok
		}
		dir = filepath.Dir(dir)
	}
}

// limitsIn reads a cgroup folder's limit file ("max" is none) and use file; left is
// the limit less the use (the limit where the use is not readable). The use counts
// the page cache, which the kernel reclaims before it kills: the file pages not
// recently used (cacheKey's line of memory.stat) are left out of it, as Kubernetes
// leaves them out of a container's working set.
func limitsIn(dir, limitFile, useFile, cacheKey string) (limit, left uint64, ok bool) {
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	limit, ok = read(limitFile)
	if !ok || limit == 0 {
		return 0, 0, false
	}
	left = limit
	if used, uok := read(useFile); uok {
		if b, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
			used -= min(statValue(b, cacheKey), used)
		}
		left = limit - min(used, limit)
	}
	return limit, left, true
}

// statValue reads the value of key from the text of a cgroup's memory.stat, lines of
// "key value"; 0 where it has none.
func statValue(stat []byte, key string) uint64 {
	for _, line := range strings.Split(string(stat), "\n") {
		if v, found := strings.CutPrefix(line, key+" "); found {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// v1MemoryPath finds cgroup v1's memory controller's line "N:memory:/path" (the
// controllers may be several, comma-separated) in the text of /proc/self/cgroup; ""
// where it has none.
func v1MemoryPath(procCgroup string) string {
	for _, line := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			return strings.TrimSuffix(parts[2], "/")
		}
	}
	return ""
}

// v2Path finds cgroup v2's line "0::/path" in the text of /proc/self/cgroup.
func v2Path(procCgroup string) (string, bool) {
	for _, line := range strings.Split(procCgroup, "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			return strings.TrimSuffix(p, "/"), true
		}
	}
	return "", false
}
