package sysmem

import "testing"

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
	free, ok := Available()
	if !ok || free == 0 || total <= 0 {
		t.Fatalf("Total() = %d, Available() = %d, %v", total, free, ok)
	}
	if free > uint64(total) {
		t.Errorf("Available() = %d is more than Total() = %d", free, total)
	}
}
