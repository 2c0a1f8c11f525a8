package sysmem

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		meminfo string
		want    uint64
		ok      bool
	}{
		{"MemTotal:       24583300 kB\nMemFree:        22000000 kB\nMemAvailable:   23000000 kB\n", 23000000 * 1024, true},
		{"MemTotal:       24583300 kB\n", 0, false},
		{"MemAvailable:   lots kB\n", 0, false},
		{"", 0, false},
	} {
		got, ok := memAvailable([]byte(tc.meminfo))
		if got != tc.want || ok != tc.ok {
			t.Errorf("memAvailable(%q) = %d, %v; want %d, %v", tc.meminfo, got, ok, tc.want, tc.ok)
		}
	}
	swap := "MemAvailable:   23000000 kB\nSwapTotal:       2000000 kB\nSwapFree:        1500000 kB\n"
	if got, ok := meminfoValue([]byte(swap), "SwapFree"); got != 1500000*1024 || !ok {
		t.Errorf("SwapFree: %d, %v", got, ok)
	}
}

// The swap free adds to the memory free, never takes from it.
func TestFreeWithSwap(t *testing.T) {
	free, ok := Free().Bytes()
	all, allOK := FreeWithSwap().Bytes()
	if ok != allOK || all < free {
		t.Errorf("Free %d (%v), with swap %d (%v)", free, ok, all, allOK)
	}
}

// What the machine's processes share: the least of the memory free, a cgroup's room
// and, under strict overcommit, the commit limit's, each named.
func TestShared(t *testing.T) {
	const kB = 1024
	meminfo := "MemAvailable:   23000000 kB\nSwapFree:        1500000 kB\nCommitLimit:    12000000 kB\nCommitted_AS:    2000000 kB\n"
	overcommitted := "MemAvailable:   23000000 kB\nCommitLimit:    12000000 kB\nCommitted_AS:   13000000 kB\n"
	for _, tc := range []struct {
		name     string
		meminfo  string
		cg       cgroupLeft
		strict   bool
		withSwap bool
		want     uint64
		ok       bool
		what     string
	}{
		{"memory", meminfo, cgroupLeft{}, false, false, 23000000 * kB, true, "memory free"},
		{"memory and swap", meminfo, cgroupLeft{}, false, true, 24500000 * kB, true, "memory and swap free"},
		{"a cgroup", meminfo, cgroupLeft{4 << 30, true}, false, false, 4 << 30, true, "memory left under its cgroup's limit"},
		{"a cgroup and swap", meminfo, cgroupLeft{4 << 30, true}, false, true, 4<<30 + 1500000*kB, true, "memory left under its cgroup's limit and swap free"},
		{"a cgroup of more", meminfo, cgroupLeft{64 << 30, true}, false, false, 23000000 * kB, true, "memory free"},
		{"strict overcommit", meminfo, cgroupLeft{}, true, false, 10000000 * kB, true, "vm.overcommit_memory=2"},
		// The commit limit counts swap already.
		{"strict overcommit and swap", meminfo, cgroupLeft{}, true, true, 10000000 * kB, true, "vm.overcommit_memory=2"},
		{"strict overcommit past its limit", overcommitted, cgroupLeft{}, true, false, 0, true, "vm.overcommit_memory=2"},
		{"strict overcommit under a smaller cgroup", meminfo, cgroupLeft{4 << 30, true}, true, false, 4 << 30, true, "cgroup"},
		{"strict overcommit unread", "MemAvailable:   23000000 kB\n", cgroupLeft{}, true, false, 23000000 * kB, true, "memory free"},
		{"only a cgroup", "", cgroupLeft{4 << 30, true}, false, false, 4 << 30, true, "cgroup"},
		{"nothing", "", cgroupLeft{}, true, false, 0, false, "memory free"},
	} {
		r := shared([]byte(tc.meminfo), tc.cg, tc.strict, tc.withSwap)
		got, ok := r.Bytes()
		if got != tc.want || ok != tc.ok || !strings.Contains(r.What(), tc.what) || r.Strict != tc.strict {
			t.Errorf("%s: %d, %v, %q; want %d, %v, %q", tc.name, got, ok, r.What(), tc.want, tc.ok, tc.what)
		}
	}
}

// An address-space limit is each process's own: it binds where it leaves less than
// the memory shared, and processes that share the memory do not share it.
func TestRoom(t *testing.T) {
	const gb = 1_000_000_000
	limited := Room{Shared: 8 * gb, SharedKnown: true, AddressLimit: 6 * gb, AddressLeft: 3 * gb}
	for _, tc := range []struct {
		name  string
		room  Room
		want  uint64
		ok    bool
		binds bool
		what  string
	}{
		{"memory", Room{Shared: 8 * gb, SharedKnown: true}, 8 * gb, true, false, "memory free"},
		{"unknown", Room{}, 0, false, false, "memory free"},
		{"a limit", limited, 3 * gb, true, true, "address space left under its limit of 6 GB (ulimit -v)"},
		{"a limit of more", Room{Shared: 2 * gb, SharedKnown: true, AddressLimit: 6 * gb, AddressLeft: 3 * gb}, 2 * gb, true, false, "memory free"},
		{"a limit, memory unknown", Room{AddressLimit: 6 * gb, AddressLeft: 3 * gb}, 3 * gb, true, true, "ulimit -v"},
		{"two processes", limited.Divided(2), 3 * gb, true, true, "ulimit -v"},
		{"four processes", limited.Divided(4), 2 * gb, true, false, "memory free"},
		{"a limit, four processes", Room{Shared: 16 * gb, SharedKnown: true, AddressLimit: 6 * gb, AddressLeft: 3 * gb}.Divided(4), 3 * gb, true, true, "ulimit -v"},
	} {
		got, ok := tc.room.Bytes()
		if got != tc.want || ok != tc.ok || tc.room.AddressBinds() != tc.binds || !strings.Contains(tc.room.What(), tc.what) {
			t.Errorf("%s: %d, %v, binds %v, %q; want %d, %v, %v, %q", tc.name, got, ok, tc.room.AddressBinds(), tc.room.What(), tc.want, tc.ok, tc.binds, tc.what)
		}
	}
}

func TestV2Path(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0::/\n", "", true}, // a container's own namespace: its root
		{"0::/system.slice/slurmstepd.scope/job_42\n", "/system.slice/slurmstepd.scope/job_42", true},
		{"12:memory:/user.slice\n1:name=systemd:/user.slice\n", "", false}, // v1 only
		{"", "", false},
	} {
		got, ok := v2Path(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("v2Path(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// This machine's own: Linux has MemAvailable since 3.14, and what is free is at most
// what there is.
func TestThisMachine(t *testing.T) {
	total := Total()
	free, ok := Free().Bytes()
	if !ok || free == 0 || total <= 0 {
		t.Fatalf("Total() = %d, Free() = %d, %v", total, free, ok)
	}
	if free > uint64(total) {
		t.Errorf("Free() = %d is more than Total() = %d", free, total)
	}
}

// A parent's limit binds a child whose own is "max" (a systemd slice over a unit, a
// Slurm job over its step), and what is left is the least any level leaves.
func TestV2Limits(t *testing.T) {
	root := t.TempDir()
	write := cgroupWriter(t, root)
	write("job", "memory.max", "8000")
	write("job", "memory.current", "7000") // leaves 1000
	write("job/step", "memory.max", "max")
	write("job/step", "memory.current", "500")
	write("job/step/task", "memory.max", "5000")
	write("job/step/task", "memory.current", "2000") // leaves 3000
	write("other", "memory.max", "max")
	write("over", "memory.max", "100")
	write("over", "memory.current", "150") // past its limit: leaves nothing
	write("nouse", "memory.max", "300")
	// Of 900 in use, 600 are file pages not recently used, which the kernel takes
	// back before it kills: 1000 − 300 are left, not 100.
	write("cached", "memory.max", "1000")
	write("cached", "memory.current", "900")
	write("cached", "memory.stat", "anon 250\nfile 650\nactive_file 50\ninactive_file 600\nshmem 0")
	for _, tc := range []struct {
		path        string
		limit, left uint64
		ok          bool
	}{
		{"/job/step/task", 5000, 1000, true},
		{"/job/step", 8000, 1000, true},
		{"/other", 0, 0, false},
		{"", 0, 0, false},
		{"/gone/from/view", 0, 0, false}, // a path the mount does not show: its parents
		{"/over", 100, 0, true},
		{"/nouse", 300, 300, true},
		{"/cached", 1000, 700, true},
	} {
		limit, left, ok := walkLimits(root, tc.path, v2Files)
		if limit != tc.limit || left != tc.left || ok != tc.ok {
			t.Errorf("walkLimits(%q) = %d, %d, %v; want %d, %d, %v", tc.path, limit, left, ok, tc.limit, tc.left, tc.ok)
		}
	}
	// A container's own namespace: "0::/", the root's files are its limit.
	write("", "memory.max", "9000")
	write("", "memory.current", "1000")
	if limit, left, ok := walkLimits(root, "/gone/from/view", v2Files); limit != 9000 || left != 8000 || !ok {
		t.Errorf("walkLimits under a limited root = %d, %d, %v; want 9000, 8000, true", limit, left, ok)
	}
}

func TestV1MemoryPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"4:memory:/process_api/588a\n3:cpuset:/\n0::/\n", "/process_api/588a"},
		{"7:cpu,memory:/slurm/uid_1000/job_42/\n", "/slurm/uid_1000/job_42"},
		{"12:memory:/\n", ""},
		{"1:name=systemd:/user.slice\n0::/user.slice\n", ""}, // no memory controller
		{"", ""},
	} {
		if got := v1MemoryPath(tc.in); got != tc.want {
			t.Errorf("v1MemoryPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// cgroup v1: a Slurm job's limit under a root of none (2⁶³ less a page) binds,
// and its use less its inactive file pages is what it leaves.
func TestV1Limits(t *testing.T) {
	root := t.TempDir()
	write := cgroupWriter(t, root)
	const none = "9223372036854771712"
	write("", "memory.limit_in_bytes", none)
	write("", "memory.usage_in_bytes", "5000")
	write("slurm/job_42", "memory.limit_in_bytes", "4000")
	write("slurm/job_42", "memory.usage_in_bytes", "3000")
	write("slurm/job_42", "memory.stat", "cache 2500\nrss 500\ntotal_inactive_file 2000\n")
	write("slurm/job_42/step_0", "memory.limit_in_bytes", none)
	write("slurm/job_42/step_0", "memory.usage_in_bytes", "100")
	for _, tc := range []struct {
		path        string
		limit, left uint64
	}{
		{"/slurm/job_42/step_0", 4000, 3000}, // 4000 − (3000 − 2000)
		{"/slurm/job_42", 4000, 3000},
		{"/elsewhere", 9223372036854771712, 9223372036854771712 - 5000},
		{"", 9223372036854771712, 9223372036854771712 - 5000},
	} {
		limit, left, ok := walkLimits(root, tc.path, v1Files)
		if limit != tc.limit || left != tc.left || !ok {
			t.Errorf("walkLimits(%q, v1) = %d, %d, %v; want %d, %d, true", tc.path, limit, left, ok, tc.limit, tc.left)
		}
	}
}

// cgroupWriter writes a cgroup file's value under root, making its folder.
func cgroupWriter(t *testing.T, root string) func(dir, name, value string) {
	return func(dir, name, value string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, name), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAddressLeft(t *testing.T) {
	for _, tc := range []struct {
		status string
		limit  uint64
		want   uint64
	}{
		{"Name:\temclust\nVmPeak:\t 3009380 kB\nVmSize:\t  603416 kB\n", 4 << 30, 4<<30 - 603416*1024},
		{"VmSize:\t 5000000 kB\n", 4 << 30, 0}, // past the limit already (it was lowered)
		{"Name:\temclust\n", 4 << 30, 4 << 30}, // no VmSize: a kernel thread's, or unread
		{"", 1 << 20, 1 << 20},
	} {
		if got := addressLeft(tc.limit, []byte(tc.status)); got != tc.want {
			t.Errorf("addressLeft(%d, %q) = %d, want %d", tc.limit, tc.status, got, tc.want)
		}
	}
}

// Under a limit on its address space that leaves less than the memory free, this
// process's free memory is what the limit leaves, and messages name the limit.
func TestAddressSpaceLimit(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	free, ok := Free().Bytes()
	if !ok {
		t.Fatalf("no memory figure on this machine")
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	size, ok := meminfoValue(status, "VmSize")
	if !ok {
		t.Fatalf("no VmSize in /proc/self/status")
	}
	// Room for the test itself, and less than the memory free (and than what a
	// limit already set leaves: Grid Engine's h_vmem).
	room := min(free/2, 1<<30)
	if old.Cur != rlimInfinity && old.Cur > size {
		room = min(room, old.Cur-size)
	}
	lim := old
	lim.Cur = size + room
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &old); err != nil {
			t.Fatal(err)
		}
	}()

	limit, left, limited := AddressSpace()
	if !limited || limit != lim.Cur || left > room {
		t.Errorf("AddressSpace() = %d, %d, %v; want %d, at most %d, true", limit, left, limited, lim.Cur, room)
	}
	for _, r := range []Room{Free(), FreeWithSwap()} {
		got, ok := r.Bytes()
		if !ok || got > room {
			t.Errorf("%s: %d (%v) under a limit that leaves at most %d", r.What(), got, ok, room)
		}
		if !r.AddressBinds() || r.AddressLimit != lim.Cur {
			t.Errorf("%+v: the limit of %d does not bind, leaving %d of %d free", r, lim.Cur, room, free)
		}
		if !strings.Contains(r.What(), "ulimit -v") {
			t.Errorf("What = %q", r.What())
		}
	}
}
