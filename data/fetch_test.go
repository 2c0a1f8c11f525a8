package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"emclust/data/datatest"
)

type tarEntry struct {
	name string
	body string
	typ  byte // tar.TypeReg when 0
}

func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typ}
		switch e.typ {
		case 0:
			h.Typeflag = tar.TypeReg
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeSymlink:
			h.Linkname, h.Size = e.body, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func md5Hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// fileServer serves files by URL path on 127.0.0.1 and counts requests.
func fileServer(t *testing.T, files map[string][]byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// dirContents lists the paths under dir, slash-separated, for comparing what a fetch
// left behind.
func dirContents(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFetchTarGz(t *testing.T) {
	arch := tarGz(t,
		tarEntry{name: "toy-bin/", typ: tar.TypeDir},
		tarEntry{name: "toy-bin/a.bin", body: "alpha"},
		tarEntry{name: "toy-bin/sub/b.bin", body: "beta"},
		tarEntry{name: "./toy-bin/readme.txt", body: "hello"},
	)
	srv, hits := fileServer(t, map[string][]byte{"/toy.tar.gz": arch})
	f := &Fetcher{Client: srv.Client(), Archives: map[string]Archive{"toy": {Name: "toy", Files: []Remote{{
		URL:      srv.URL + "/toy.tar.gz",
		MD5:      md5Hex(arch),
		Provides: []string{"toy-bin/a.bin", "toy-bin/sub/b.bin"},
	}}}}}
	dir := filepath.Join(t.TempDir(), "data")
	var last, total int64
	err := f.Fetch(context.Background(), "toy", dir, func(done, tot int64) { last, total = done, tot })
	if err != nil {
		t.Fatal(err)
	}
	if last != int64(len(arch)) || total != int64(len(arch)) {
		t.Errorf("progress ended at %d of %d, want %d of %d", last, total, len(arch), len(arch))
	}
	got := dirContents(t, dir)
	want := []string{"toy-bin", "toy-bin/a.bin", "toy-bin/readme.txt", "toy-bin/sub", "toy-bin/sub/b.bin"}
	if !slices.Equal(got, want) {
		t.Errorf("fetched %q, want %q (no temporary files)", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "toy-bin", "sub", "b.bin")); string(b) != "beta" {
		t.Errorf("b.bin holds %q", b)
	}

	// Present files are not downloaded again.
	if err := f.Fetch(context.Background(), "toy", dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// A partly present data set is completed.
	os.Remove(filepath.Join(dir, "toy-bin", "a.bin"))
	if err := f.Fetch(context.Background(), "toy", dir, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "toy-bin", "a.bin")); string(b) != "alpha" {
		t.Errorf("a.bin holds %q after refetch", b)
	}
}

func TestFetchGz(t *testing.T) {
	gz := datatest.Gzip(idxLabelsBytes(1, 2, 3))
	srv, _ := fileServer(t, map[string][]byte{"/mirror/labels-idx1-ubyte.gz": gz})
	f := &Fetcher{Client: srv.Client(), Archives: map[string]Archive{"toy": {Name: "toy", Files: []Remote{{
		URL:      srv.URL + "/mirror/labels-idx1-ubyte.gz",
		MD5:      md5Hex(gz),
		Provides: []string{"labels-idx1-ubyte.gz"},
	}}}}}
	dir := t.TempDir()
	if err := f.Fetch(context.Background(), "toy", dir, nil); err != nil {
		t.Fatal(err)
	}
	if got := dirContents(t, dir); !slices.Equal(got, []string{"labels-idx1-ubyte.gz"}) {
		t.Errorf("fetched %q", got)
	}
	labels, err := ReadIDXLabels(filepath.Join(dir, "labels-idx1-ubyte.gz"))
	if err != nil || !slices.Equal(labels, []int{1, 2, 3}) {
		t.Errorf("labels %v, %v", labels, err)
	}
}

func TestFetchErrors(t *testing.T) {
	good := tarGz(t, tarEntry{name: "x/a.bin", body: "alpha"})
	files := map[string][]byte{
		"/good.tar.gz":     good,
		"/dotdot.tar.gz":   tarGz(t, tarEntry{name: "x/a.bin", body: "a"}, tarEntry{name: "../evil.txt", body: "pwned"}),
		"/nested.tar.gz":   tarGz(t, tarEntry{name: "x/../../evil.txt", body: "pwned"}),
		"/absolute.tar.gz": tarGz(t, tarEntry{name: "/tmp/evil.txt", body: "pwned"}),
		"/symlink.tar.gz":  tarGz(t, tarEntry{name: "x/link", body: "/etc/passwd", typ: tar.TypeSymlink}),
		"/short.tar.gz":    good[:len(good)-10],
		"/missing.tar.gz":  tarGz(t, tarEntry{name: "y/a.bin", body: "alpha"}),
	}
	srv, _ := fileServer(t, files)
	const wrongMD5 = "0123456789abcdef0123456789abcdef"
	cases := []struct {
		file, md5 string
		want      []string
	}{
		{"/good.tar.gz", wrongMD5, []string{srv.URL + "/good.tar.gz", "MD5 " + md5Hex(good), "want " + wrongMD5}},
		{"/absent.tar.gz", wrongMD5, []string{"fetch toy: GET " + srv.URL + "/absent.tar.gz: 404 Not Found"}},
		{"/dotdot.tar.gz", "", []string{`entry "../evil.txt" points outside`}},
		{"/nested.tar.gz", "", []string{`entry "x/../../evil.txt" points outside`}},
		{"/absolute.tar.gz", "", []string{`entry "/tmp/evil.txt" points outside`}},
		{"/symlink.tar.gz", "", []string{`entry "x/link" is a link`}},
		{"/short.tar.gz", "", []string{"short.tar.gz", "unexpected EOF"}},
		{"/missing.tar.gz", "", []string{"archive has no x/a.bin"}},
	}
	for _, tc := range cases {
		t.Run(strings.TrimPrefix(tc.file, "/"), func(t *testing.T) {
			sum := tc.md5
			if sum == "" {
				sum = md5Hex(files[tc.file])
			}
			f := &Fetcher{Client: srv.Client(), Archives: map[string]Archive{"toy": {Name: "toy", Files: []Remote{{
				URL: srv.URL + tc.file, MD5: sum, Provides: []string{"x/a.bin"},
			}}}}}
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			err := f.Fetch(context.Background(), "toy", dir, nil)
			imgWantErr(t, err, tc.want...)
			// Nothing is left behind: no temporary file, no partial extraction, not
			// the folder made for them.
			if got := dirContents(t, parent); len(got) != 0 {
				t.Errorf("left behind %q", got)
			}
			// A folder that was there stays.
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			imgWantErr(t, f.Fetch(context.Background(), "toy", dir, nil), tc.want...)
			if got := dirContents(t, parent); !slices.Equal(got, []string{"data"}) {
				t.Errorf("left behind %q", got)
			}
		})
	}
	_, err := os.Stat("/tmp/evil.txt")
	if err == nil {
		t.Error("/tmp/evil.txt exists")
	}

	f := &Fetcher{Archives: map[string]Archive{"toy": {}, "other": {}}}
	imgWantErr(t, f.Fetch(context.Background(), "nope", t.TempDir(), nil), `unknown data set "nope" (want one of other, toy)`)
}

func TestFetchCancelled(t *testing.T) {
	srv, _ := fileServer(t, map[string][]byte{"/a.gz": []byte("x")})
	f := &Fetcher{Client: srv.Client(), Archives: map[string]Archive{"toy": {Name: "toy", Files: []Remote{{
		URL: srv.URL + "/a.gz", MD5: md5Hex([]byte("x")), Provides: []string{"a.gz"},
	}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	imgWantErr(t, f.Fetch(ctx, "toy", dir, nil), "context canceled")
	if got := dirContents(t, dir); len(got) != 0 {
		t.Errorf("left behind %q", got)
	}
}

// TestDefaultArchives checks the official table against what the loaders expect,
// without any network access.
func TestDefaultArchives(t *testing.T) {
	table := DefaultArchives()
	names := ImageSetNames()
	for _, n := range names {
		if _, ok := table[n]; !ok {
			t.Errorf("no archive for %s", n)
		}
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for name, a := range table {
		if a.Name != name || len(a.Files) == 0 {
			t.Errorf("%s: bad entry %+v", name, a)
		}
		for _, r := range a.Files {
			if !hex32.MatchString(r.MD5) {
				t.Errorf("%s: MD5 %q", r.URL, r.MD5)
			}
			if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
				t.Errorf("URL %q", r.URL)
			}
			if len(r.Provides) == 0 {
				t.Errorf("%s provides nothing", r.URL)
			}
		}
	}
	if got := table["mnist"].Files[0].URL; got != "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz" {
		t.Errorf("mnist URL %s", got)
	}
	// The copy is independent of the table.
	table["mnist"].Files[0].Provides[0] = "changed"
	if DefaultArchives()["mnist"].Files[0].Provides[0] == "changed" {
		t.Error("DefaultArchives shares its table")
	}
}
