package command

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// nobody is the user id the writability checks run as when the tests run as root,
// whom access(2) refuses nothing but on a read-only mount.
const nobody = 65534

// asUser runs f on an OS thread of its own whose user ids are uid, where the tests
// run as root; otherwise on this one. Raw setresuid changes the calling thread's ids
// alone (Go's syscall.Setresuid would change every thread's), and the thread, locked
// and never unlocked, ends with its goroutine rather than return to the scheduler.
func asUser(t *testing.T, uid int, f func() error) error {
	t.Helper()
	if os.Geteuid() != 0 {
		return f()
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); errno != 0 {
			done <- errno
			return
		}
		done <- f()
	}()
	return <-done
}

// An output whose folder cannot be written is refused before any work, with the
// flag and the folder named; a link's target's folder is the one checked.
func TestCheckOutputUnwritableFolder(t *testing.T) {
	dir := t.TempDir()
	// The user the check runs as must reach the folders: t.TempDir's are 0700.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ro, rw := filepath.Join(dir, "ro"), filepath.Join(dir, "rw")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "old.csv"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ro, "old.csv"), filepath.Join(rw, "link.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) }) // for t.TempDir's removal, where not root
	if os.Geteuid() == 0 {
		// The folders are root's: what nobody may write there is what "others" may.
		if err := os.Chmod(rw, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, flag, out string
		force           bool
		want            string // in the refusal; "" for none
	}{
		{"new file, read-only folder", "--out", filepath.Join(ro, "p.csv"), false, "folder " + ro + " cannot be written"},
		{"existing file, read-only folder", "--out", filepath.Join(ro, "old.csv"), true, "folder " + ro + " cannot be written"},
		{"markdown, read-only folder", "--markdown", filepath.Join(ro, "t.md"), false, "--markdown " + filepath.Join(ro, "t.md")},
		{"link into a read-only folder", "--out", filepath.Join(rw, "link.csv"), true, "folder " + ro + " cannot be written"},
		{"new file, writable folder", "--out", filepath.Join(rw, "p.csv"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := asUser(t, nobody, func() error { return checkOutputFlag(tt.flag, tt.out, tt.force) })
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var usage usageError
			if !errors.As(err, &usage) {
				t.Fatalf("got %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), tt.flag+" ") {
				t.Errorf("refusal %q, want %q after %s", err, tt.want, tt.flag)
			}
		})
	}
}
