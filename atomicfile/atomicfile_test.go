package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
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
