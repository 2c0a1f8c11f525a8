package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
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
