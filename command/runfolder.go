package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/train"
)

// checkNewRunDir refuses a folder that holds a run already, or files a run did not
// write there: a new run writes config.json, assignments.csv and others over
// whatever has those names. A run stopped before its first checkpoint leaves only
// its own files, and its folder can be taken again.
func checkNewRunDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); err == nil {
		return usageError{fmt.Errorf("%s already holds a run; continue it with --resume %s or pick another --out", dir, data.ShellQuote(dir))}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
			return usageError{fmt.Errorf("--out %s is a file; name a new folder for the run", dir)}
		}
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	var foreign, named []string // named: files of a run's names, a run's only beside its config
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == train.TrialsDir && e.IsDir() && isRunConfig(filepath.Join(dir, name, "config.json")):
			return usageError{fmt.Errorf("%s holds the trials or restarts of a run that stopped among them; continue it with --resume %s or pick another --out", dir, data.ShellQuote(dir))}
		case name == train.LockName && train.IsRunLock(filepath.Join(dir, name)), isPartialRunFile(name):
		case slices.Contains(train.RunFiles, name):
			named = append(named, name)
		default:
			foreign = append(foreign, name)
		}
	}
	if len(named) > 0 && !isRunConfig(filepath.Join(dir, "config.json")) {
		foreign = append(foreign, named...)
	}
	if len(foreign) > 0 {
		return usageError{fmt.Errorf("--out %s holds files no emclust run wrote (%s), which a run could write over or mix with its own; name a new or empty folder", dir, someNames(foreign))}
	}
	return nil
}

// someNames lists the first three of names, and "…" for the rest.
func someNames(names []string) string {
	if len(names) > 3 {
		names = append(names[:3:3], "…")
	}
	return strings.Join(names, ", ")
}

// isPartialRunFile says whether name is what atomicfile leaves of a run file a
// process was killed while writing.
func isPartialRunFile(name string) bool {
	return slices.ContainsFunc(train.RunFiles, func(f string) bool { return atomicfile.IsTemp(name, f) })
}

// isRunConfig says whether path is a run's config.json rather than a file of the
// same name of the user's.
func isRunConfig(path string) bool {
	b, err := atomicfile.ReadFile(path, train.MaxJSONBytes)
	if err != nil {
		return false
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(b, &cfg) != nil {
		return false
	}
	_, k := cfg["k"]
	_, obj := cfg["objective"]
	return k && obj
}

// runFolder is a new run's folder, locked from before its data are read until the
// run takes it: no other run can take it between the check and the first write.
type runFolder struct {
	dir  string
	lock *os.File // nil once the run has it
	// made is the highest folder of dir's path this command made ("" if none):
	// it and the folders below it on the way to dir go again if no run takes dir.
	made string
}

// takeNewRunFolder makes out (runs/<name>-<time> when empty), or takes it when it is
// empty or a run left it before its first checkpoint (checkNewRunDir), and locks it.
func takeNewRunFolder(out, name string) (*runFolder, error) {
	f := &runFolder{dir: out}
	if out == "" {
		f.made = firstMissing("runs")
		dir, err := newRunDirName(name, time.Now())
		if err != nil {
			f.removeMade()
			return nil, err
		}
		f.dir = dir
		if f.made == "" {
			f.made = dir
		}
	} else {
		if err := checkNewRunDir(out); err != nil {
			return nil, err
		}
		f.made = firstMissing(out)
	}
	lock, err := train.LockDir(f.dir)
	if err != nil {
		f.removeMade()
		return nil, err
	}
	f.lock = lock
	// Again under the lock: another run may have written it meanwhile.
	if err := checkNewRunDir(f.dir); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

// take hands the lock to the run that attaches the folder.
func (f *runFolder) take() *os.File {
	lock := f.lock
	f.lock = nil
	return lock
}

// release unlocks a folder no run took, and removes it when this command made it:
// a command that fails before training leaves no empty run folder behind.
func (f *runFolder) release() {
	if f.lock == nil {
		return
	}
	f.lock.Close()
	f.lock = nil
	os.Remove(filepath.Join(f.dir, train.LockName))
	f.removeMade()
}

// removeMade removes the folders this command made on the way to dir, deepest
// first; os.Remove leaves any that is not empty.
func (f *runFolder) removeMade() {
	if f.made == "" {
		return
	}
	for d := filepath.Clean(f.dir); ; d = filepath.Dir(d) {
		os.Remove(d)
		if d == filepath.Clean(f.made) || d == filepath.Dir(d) {
			return
		}
	}
}

// firstMissing is the highest folder of path that does not exist yet (path itself
// when only it is missing), or "" when path exists. Lstat: a dangling link is
// something the user made, not a folder to make and remove.
func firstMissing(path string) string {
	missing := ""
	for d := filepath.Clean(path); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			return missing
		}
		missing = d
		if d == filepath.Dir(d) || d == "." {
			return missing
		}
	}
}

// newRunDirName makes a new folder runs/<name>-<time> for a run given no --out,
// with -2, -3, ... added when two runs start in the same second.
func newRunDirName(name string, now time.Time) (string, error) {
	base := filepath.Join("runs", fmt.Sprintf("%s-%s", name, now.Format("20060102-150405")))
	if err := os.MkdirAll("runs", 0o755); err != nil {
		return "", fmt.Errorf("run folder: %w", err)
	}
	for i := 1; ; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) || i == 1000 {
			return "", fmt.Errorf("run folder: %w", err)
		}
	}
}
