// Package atomicfile writes files so that a reader, or a run killed half-way, sees
// either the old file or the whole new one, never a torn write.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write calls fill with a buffered writer on a temporary file beside path, syncs it,
// and renames it over path. On any error the temporary file is removed and path is
// left as it was. A path that is a symbolic link has its target replaced, so the link
// stays (a link to nothing is refused); the file keeps its permission bits (a new one
// gets 0644).
func Write(path string, fill func(w io.Writer) error) error {
	return WritePatched(path, func(w *Writer) error { return fill(w) })
}

// Writer is the buffered writer on the temporary file that WritePatched hands its
// fill. WriteAt writes over bytes it wrote before: a header whose checksums are
// known only once the data after it is written.
type Writer struct {
	bw      *bufio.Writer
	f       *os.File
	written int64
}

// Write appends p to the file.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.bw.Write(p)
	w.written += int64(n)
	return n, err
}

// WriteAt writes p at offset off of the file, within what was written before: bytes
// past it would be written over by the next Write.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > w.written {
		return 0, fmt.Errorf("write at %d..%d: past the %d bytes written", off, off+int64(len(p)), w.written)
	}
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	return w.f.WriteAt(p, off)
}

// WritePatched is Write with a fill that may go back over what it wrote.
func WritePatched(path string, fill func(w *Writer) error) (err error) {
	if path, err = resolve(path); err != nil {
		return fmt.Errorf("write %w", err)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			// A device or pipe a link leads to would be replaced by a plain file.
			return fmt.Errorf("write %s: not a regular file but %s", path, kind(fi.Mode()))
		}
		mode = fi.Mode().Perm()
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = fill(&Writer{bw: bw, f: f}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Make the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// RemoveStale deletes temporary files a killed writer of path left behind. Call it
// where no other writer of path can be running, e.g. when a run starts.
func RemoveStale(path string) {
	if target, err := resolve(path); err == nil {
		path = target // where Write puts them
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Not a glob: a folder named exp[1] would match exp1's files.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if IsTemp(e.Name(), base) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// resolve is path, or the file a symbolic link at path leads to.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return path, nil // a new file, or a plain one
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: a symbolic link to nothing that can be written (%w)", path, err)
	}
	return target, nil
}

// Folder is the folder Write writes path's temporary file in, and so must be able
// to write in: path's, or, where path is a symbolic link, its target's.
func Folder(path string) (string, error) {
	target, err := resolve(path)
	if err != nil {
		return "", err
	}
	return filepath.Dir(target), nil
}

// LinkToNothing is an error naming path and where it leads, where path is a symbolic
// link to nothing, and nil otherwise: a reader that found no file at path says that
// the file is missing from where the link points, not from the folder.
func LinkToNothing(path string) error {
	to, err := os.Readlink(path)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%s is a link to %s, which does not exist", path, to)
}

// tempPattern names the temporary files Write makes for a file named base.
func tempPattern(base string) string { return "." + base + ".tmp*" }

// IsTemp says whether name is a temporary file Write makes for a file named base:
// what a writer killed before its rename leaves.
func IsTemp(name, base string) bool {
	return strings.HasPrefix(name, strings.TrimSuffix(tempPattern(base), "*"))
}

// WriteBytes writes data to path atomically.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// ReadFile reads the regular file at path, of at most max bytes. emclust's own files
// are read whole; one that a link or a mistake made a device, a pipe or a file of any
// size would otherwise be read without end, or hang the reader.
func ReadFile(path string, max int64) ([]byte, error) {
	f, _, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = &os.PathError{Op: "read", Path: path, Err: errors.New("grew past its limit while read")}
	}
	return b, err
}

// Open opens the regular file at path, of at most max bytes, for reading, and
// returns its size, for a reader that streams it rather than read it whole; the
// same files as ReadFile's are refused.
func Open(path string, max int64) (*os.File, int64, error) {
	// Non-blocking: opening a pipe would wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file but %s", kind(fi.Mode()))}
	case fi.Size() > max:
		err = &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, more than the %d such a file may hold", fi.Size(), max)}
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// kind names what a file that is not a regular one is, for a message.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("of type %v", m.Type())
}
