package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.txt")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("new contents")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new contents" {
		t.Fatalf("got %q, %v", b, err)
	}
}

func TestFailedWriteKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "old" {
		t.Fatalf("file = %q, want old contents", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temp file left behind: %v", ents)
	}
}

// WritePatched's WriteAt goes back over bytes still in the buffer and bytes already
// on disk alike, and later writes go on at the end.
func TestWritePatched(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.bin")
	err := WritePatched(p, func(w *Writer) error {
		if _, err := w.Write([]byte("????-body-")); err != nil {
			return err
		}
		if _, err := w.WriteAt([]byte("HEAD"), 0); err != nil {
			return err
		}
		if _, err := w.WriteAt([]byte("TAIL"), 8); err == nil {
			return errors.New("a patch past the bytes written was taken")
		}
		if _, err := w.Write(make([]byte, 2<<20)); err != nil { // past the buffer: on disk before the next patch
			return err
		}
		if _, err := w.WriteAt([]byte("BODY"), 5); err != nil {
			return err
		}
		_, err := w.Write([]byte("-end"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if len(b) != 10+2<<20+4 || string(b[:10]) != "HEAD-BODY-" || string(b[len(b)-4:]) != "-end" {
		t.Fatalf("file of %d bytes starts %q, ends %q", len(b), b[:10], b[len(b)-4:])
	}
}

// IsTemp knows Write's temporary files by name, and no others.
func TestIsTemp(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		want       bool
	}{
		{".config.json.tmp123", "config.json", true},
		{"config.json", "config.json", false},
		{".config.json.tmp123", "summary.json", false},
		{".config.jsonx.tmp1", "config.json", false},
	} {
		if got := IsTemp(tc.name, tc.base); got != tc.want {
			t.Errorf("IsTemp(%q, %q) = %v, want %v", tc.name, tc.base, got, tc.want)
		}
	}
}

// A file's permission bits survive a rewrite, and a link's target is rewritten
// with the link left in place.
func TestWriteKeepsModeAndLink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("secret.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a link: %v, %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(secret)
	fi, err := os.Stat(secret)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.txt holds %q, mode %v (%v); want \"new\", -rw-------", b, fi.Mode().Perm(), err)
	}
}

// A link that leads nowhere is refused, not replaced by a file.
func TestWriteRefusesDanglingLink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(filepath.Join(dir, "gone", "x.txt"), link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("new")); err == nil || !strings.Contains(err.Error(), "link.txt: a symbolic link to nothing") {
		t.Errorf("error %v, want one naming the link", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a link: %v", err)
	}
}

// RemoveStale removes its own file's temporary files only, whatever characters the
// folder's name has.
func TestRemoveStaleExact(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"exp[1]", "exp1"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
		os.WriteFile(filepath.Join(root, d, ".config.json.tmp222"), nil, 0o644)
	}
	RemoveStale(filepath.Join(root, "exp[1]", "config.json"))
	if _, err := os.Stat(filepath.Join(root, "exp[1]", ".config.json.tmp222")); err == nil {
		t.Error("exp[1]'s own temporary file is still there")
	}
	if _, err := os.Stat(filepath.Join(root, "exp1", ".config.json.tmp222")); err != nil {
		t.Errorf("another folder's temporary file was removed: %v", err)
	}
}

// A link to a pipe (or a device: /dev/zero became a plain file this way) is not
// replaced: the write fails and the pipe stays one.
func TestWriteRefusesNonRegularTarget(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "summary.json")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link} {
		if err := WriteBytes(p, []byte("x")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("write %s: %v, want not a regular file", p, err)
		}
	}
	if fi, err := os.Stat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the pipe is now %v (%v)", fi.Mode().Type(), err)
	}
}

// ReadFile reads a regular file within its bound, and refuses at once a pipe (which
// os.ReadFile would wait on for a writer), a directory and a file past the bound.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "config.json")
	os.WriteFile(plain, []byte("{}\n"), 0o644)
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(plain, 3); err != nil || string(b) != "{}\n" {
		t.Errorf("ReadFile of 3 bytes within 3: %q, %v", b, err)
	}
	for _, tc := range []struct {
		path string
		max  int64
		want string
	}{{fifo, 10, "not a regular file but a named pipe"}, {dir, 10, "not a regular file but a directory"}, {plain, 2, "more than the 2"}} {
		if _, err := ReadFile(tc.path, tc.max); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("ReadFile(%s, %d): %v, want an error naming it and %q", tc.path, tc.max, err, tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
}

func TestLinkToNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, to string }{{"dangling", "gone"}, {"good", "file"}} {
		if err := os.Symlink(l.to, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		want string // "" for nil
	}{
		{"dangling", "dangling is a link to gone, which does not exist"},
		{"good", ""},
		{"file", ""},
		{"missing", ""}, // no link: the caller says what is missing
	} {
		err := LinkToNothing(filepath.Join(dir, tc.name))
		if (err == nil) != (tc.want == "") || err != nil && !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Folder is where Write puts its temporary file: beside a link's target, not the
// link, as a write through the link showed.
func TestFolder(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target, link := filepath.Join(b, "out.csv"), filepath.Join(a, "link.csv")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(a, "new.csv"), a},
		{target, b},
		{link, b},
	} {
		got, err := Folder(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("Folder(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
		if err := Write(tc.path, func(w io.Writer) error {
			if entries, _ := os.ReadDir(got); !slices.ContainsFunc(entries, func(e os.DirEntry) bool {
				return IsTemp(e.Name(), filepath.Base(tc.path)) || IsTemp(e.Name(), "out.csv")
			}) {
				t.Errorf("writing %s: no temporary file in %s", tc.path, got)
			}
			_, err := io.WriteString(w, "y")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Folder(filepath.Join(dir, "nowhere", "x")); err != nil {
		t.Errorf("a new file's folder: %v", err)
	}
	os.Remove(target)
	if _, err := Folder(link); err == nil {
		t.Errorf("a link to nothing: no error")
	}
}
