// Package sysmem says how much memory this process may take, so that emclust can refuse
// work too large for it with a message. Linux hands out memory lazily: past what the
// machine (or the container, or the Slurm job) has, the kernel's OOM killer ends the
// process with SIGKILL and no word of why.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
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

// Available is the memory this process may still take: /proc/meminfo's MemAvailable,
// or the cgroup's limit less its use where that is less. ok is false where neither is
// known.
func Available() (free uint64, ok bool) {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		free, ok = memAvailable(b)
	}
	if limit, used, cok := cgroup(); cok && used >= 0 {
		left := uint64(0)
		if limit > uint64(used) {
			left = limit - uint64(used)
		}
		if !ok || left < free {
			free, ok = left, true
		}
	}
	return free, ok
}

// memAvailable reads MemAvailable (in kB) from the text of /proc/meminfo.
func memAvailable(meminfo []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		name, rest, found := strings.Cut(sc.Text(), ":")
		if !found || name != "MemAvailable" {
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

// cgroup reads the memory limit of this process's cgroup, and its use (-1 where not
// known): v2's files in the folder /proc/self/cgroup names (a Slurm job's or a
// systemd unit's; a container's root), else v1's. ok is false where no limit is set.
func cgroup() (limit uint64, used int64, ok bool) {
	read := func(path string) (uint64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	dir := "/sys/fs/cgroup"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if p, found := v2Path(string(b)); found {
			dir += p
		}
	}
	if limit, ok := read(dir + "/memory.max"); ok && limit > 0 {
		if cur, cok := read(dir + "/memory.current"); cok {
			return limit, int64(cur), true
		}
		return limit, -1, true
	}
	// v1, whose "no limit" is a number near 2⁶³, above any machine's memory.
	if limit, ok := read("/sys/fs/cgroup/memory/memory.limit_in_bytes"); ok && limit > 0 {
		if cur, cok := read("/sys/fs/cgroup/memory/memory.usage_in_bytes"); cok {
			return limit, int64(cur), true
		}
		return limit, -1, true
	}
	return 0, -1, false
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
