package train

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// IsRunLock tells a run's lock file from a user's file of the same name, which a run
// taking the lock would overwrite.
func TestIsRunLock(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          bool
	}{
		{"empty: taken, the id not yet written", "", true},
		{"a process id", "4242\n", true},
		{"a process id without newline", "4242", true},
		{"notes", "my lock notes\n", false},
		{"a signed number", "+5\n", false},
		{"zero", "0\n", false},
		{"two lines", "12\n34\n", false},
		{"long digits", "123456789012345678901234567890\n", false},
	} {
		path := filepath.Join(dir, "lock")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := IsRunLock(path); got != tc.want {
			t.Errorf("%s (%q): IsRunLock %v, want %v", tc.name, tc.content, got, tc.want)
		}
	}
	if IsRunLock(filepath.Join(dir, "missing")) {
		t.Error("a missing file is a run lock")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if IsRunLock(fifo) { // and it must not block reading it
		t.Error("a FIFO is a run lock")
	}

	// What lockRunDir writes is a run lock.
	f, err := lockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := os.ReadFile(filepath.Join(dir, LockName))
	if string(b) != strconv.Itoa(os.Getpid())+"\n" || !IsRunLock(filepath.Join(dir, LockName)) {
		t.Errorf("lockRunDir wrote %q, which IsRunLock does not take for a run lock", b)
	}
}

// A .lock that is a link, or a pipe, is refused: the pid would be written into the
// link's target, a user's file.
func TestLockRefusesLinkAndPipe(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("mine\n"), 0o644)
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o755)
	if err := os.Symlink(notes, filepath.Join(run, LockName)); err != nil {
		t.Fatal(err)
	}
	if f, err := LockDir(run); err == nil {
		f.Close()
		t.Error("a .lock link to a file was taken as the lock")
	}
	if b, _ := os.ReadFile(notes); string(b) != "mine\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	os.Remove(filepath.Join(run, LockName))
	if err := syscall.Mkfifo(filepath.Join(run, LockName), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := LockDir(run); err == nil {
		f.Close()
		t.Error("a .lock pipe was taken as the lock")
	}
}
