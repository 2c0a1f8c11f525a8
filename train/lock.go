package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"emclust/atomicfile"
)

// LockName is the file in a run folder that a writing run holds an advisory lock on.
const LockName = ".lock"

// lockHolder reads a lock file's bytes as lockRunDir writes them: empty (the lock
// taken, the id not yet written) or the holder's process id and a newline.
func lockHolder(b []byte) (pid int, isLock bool) {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return 0, true
	}
	if strings.TrimLeft(s, "0123456789") != "" { // Atoi would take a sign
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	return pid, err == nil && pid > 0
}

// IsRunLock says whether path is a run's lock file rather than a file of the same
// name of the user's, which taking the lock would overwrite.
func IsRunLock(path string) bool {
	b, err := atomicfile.ReadFile(path, 24)
	if err != nil {
		return false
	}
	_, isLock := lockHolder(b)
	return isLock
}

// lockRunDir takes an exclusive advisory lock on dir/.lock for as long as the returned
// file stays open, and writes the holder's process id into it for the message a
// second writer gets. Two runs writing one folder would otherwise both exit 0 with one
// run's checkpoint, metrics and assignments lost. The kernel drops the lock when the
// process ends, however it ends, so a killed run leaves no stale lock behind.
func lockRunDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	// Not through a link: the pid written below would land in the link's target.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("folder %s: %s is a symbolic link, not a run's lock; remove it", dir, LockName)
	}
	if err != nil {
		return nil, fmt.Errorf("folder: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("folder %s: %s is not a regular file, not a run's lock; remove it", dir, LockName)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another emclust process"
			if b, err := atomicfile.ReadFile(path, 24); err == nil {
				if pid, ok := lockHolder(b); ok && pid > 0 {
					holder = fmt.Sprintf("another emclust process (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("folder %s is in use by %s; wait for it to finish, or use another folder", dir, holder)
		}
		return nil, fmt.Errorf("folder %s: lock: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
