package data

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Archive is what Fetch downloads for one data set: one or more remote files.
type Archive struct {
	Name  string // data set name, as LoadImages knows it
	Files []Remote
}

// Remote is one file of an Archive.
type Remote struct {
	URL string
	// MD5 is the hex digest the data set's authors publish. MD5 guards against
	// truncated or corrupted downloads, not against tampering, but it is the only
	// digest these data sets come with.
	MD5 string
	// Provides lists the paths, slash-separated and relative to the data directory,
	// that the download yields: the file itself for a .gz, the extracted files for a
	// .tar.gz. Fetch skips a download whose paths all exist, and fails when an
	// archive does not yield them all.
	Provides []string
}

// archives is the table of official downloads. It is never modified; DefaultArchives
// hands out copies.
var archives = map[string]Archive{
	"mnist": idxArchive("mnist", "https://ossci-datasets.s3.amazonaws.com/mnist/", [4]string{
		"f68b3c2dcbeaaa9fbdd348bbdeb94873",
		"d53e105ee54ea40749a09fcbcd1e9432",
		"9fb629c4189551a2d022fa330f9573f3",
		"ec29112dd5afa0611ce80d1b7f02629c",
	}),
	"fashion-mnist": idxArchive("fashion-mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", [4]string{
		"8d4fb7e6c68d591d4c3dfef9ec88bf0d",
		"25c81989df183df01b3e8a0aad5dffbe",
		"bef4ecab320f06d8554ea6380940ec79",
		"bb300cfdad3c16e7a12a480ee83cd310",
	}),
	"cifar10": {Name: "cifar10", Files: []Remote{{
		URL: "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
		MD5: "c32a1d4ab5d03f1284b67883e8d87530",
		Provides: []string{
			"cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/data_batch_2.bin",
			"cifar-10-batches-bin/data_batch_3.bin", "cifar-10-batches-bin/data_batch_4.bin",
			"cifar-10-batches-bin/data_batch_5.bin", "cifar-10-batches-bin/test_batch.bin",
		},
	}}},
	"cifar100": {Name: "cifar100", Files: []Remote{{
		URL:      "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
		MD5:      "03b5dce01913d631647c71ecec9e9cb8",
		Provides: []string{"cifar-100-binary/train.bin", "cifar-100-binary/test.bin"},
	}}},
	"stl10": {Name: "stl10", Files: []Remote{{
		URL: "http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz",
		MD5: "91f7769df0f17e558f3565bffb0c7dfb",
		Provides: []string{
			"stl10_binary/train_X.bin", "stl10_binary/train_y.bin",
			"stl10_binary/test_X.bin", "stl10_binary/test_y.bin",
		},
	}}},
}

// idxArchive describes the four gzipped IDX files of an MNIST-like data set under base,
// with their MD5s in the order train images, train labels, test images, test labels.
func idxArchive(name, base string, sums [4]string) Archive {
	a := Archive{Name: name}
	for i, f := range []string{
		"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
		"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
	} {
		a.Files = append(a.Files, Remote{URL: base + f, MD5: sums[i], Provides: []string{f}})
	}
	return a
}

// DefaultArchives returns a copy of the table of official downloads, keyed by data set
// name, for callers that want to list it or start a Fetcher from it.
func DefaultArchives() map[string]Archive {
	out := make(map[string]Archive, len(archives))
	for k, a := range archives {
		files := make([]Remote, len(a.Files))
		for i, f := range a.Files {
			f.Provides = slices.Clone(f.Provides)
			files[i] = f
		}
		out[k] = Archive{Name: a.Name, Files: files}
	}
	return out
}

// A Fetcher downloads data sets. Its zero value uses http.DefaultClient and the
// official archives; tests and mirrors set their own.
type Fetcher struct {
	Client   *http.Client       // nil means http.DefaultClient
	Archives map[string]Archive // nil means the official archives
}

// Fetch downloads the named data set into dir with the official archives; see
// Fetcher.Fetch.
func Fetch(ctx context.Context, name, dir string, progress func(done, total int64)) error {
	return (&Fetcher{}).Fetch(ctx, name, dir, progress)
}

// Fetch downloads the named data set into dir, creating dir if needed, so that
// LoadImages(name, dir) finds it. Each remote file is downloaded to a temporary file in
// dir and its MD5 checked before anything takes its final name, so an interrupted or
// corrupted download never leaves a plausible-looking partial data set behind. A .gz
// is kept as it is (the IDX readers decompress it); a .tar.gz is extracted and then
// removed. Downloads whose files are already present are skipped.
//
// progress, when not nil, is called as bytes arrive with the bytes done and the total
// of the file being downloaded (-1 when the server does not say); it starts from 0 for
// each file.
func (f *Fetcher) Fetch(ctx context.Context, name, dir string, progress func(done, total int64)) error {
	table := f.Archives
	if table == nil {
		table = archives
	}
	a, ok := table[name]
	if !ok {
		return fmt.Errorf("fetch: unknown data set %q (want one of %s)",
			name, strings.Join(slices.Sorted(maps.Keys(table)), ", "))
	}
	if dir == "" {
		return fmt.Errorf("fetch %s: no directory given", name)
	}
	_, err := os.Stat(dir)
	made := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fetch %s: %w", name, err)
	}
	for _, r := range a.Files {
		if havePaths(dir, r.Provides) {
			continue
		}
		if err := f.fetchOne(ctx, r, dir, progress); err != nil {
			if made {
				os.Remove(dir) // the folder made for it, if it stayed empty: no data set's
			}
			return fmt.Errorf("fetch %s: %w", name, err)
		}
	}
	return nil
}

// havePaths reports whether all of paths (slash-separated, relative to dir) exist.
func havePaths(dir string, paths []string) bool {
	if len(paths) == 0 {
		return false
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return false
		}
	}
	return true
}

// fetchOne downloads, verifies and installs one remote file.
func (f *Fetcher) fetchOne(ctx context.Context, r Remote, dir string, progress func(done, total int64)) error {
	u, err := url.Parse(r.URL)
	if err != nil {
		return err
	}
	base := path.Base(u.Path)
	if base == "/" || base == "." {
		return fmt.Errorf("%s: URL names no file", r.URL)
	}
	if r.MD5 == "" {
		return fmt.Errorf("%s: no MD5 to verify the download against", r.URL)
	}
	isTar := strings.HasSuffix(base, ".tar.gz") || strings.HasSuffix(base, ".tgz")
	if !isTar && !slices.Equal(r.Provides, []string{base}) {
		return fmt.Errorf("%s: a plain download provides only %s, not %v", r.URL, base, r.Provides)
	}

	tmp, err := os.CreateTemp(dir, "."+base+".*.part")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	}()
	got, err := f.download(ctx, r.URL, tmp, progress)
	if err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if !strings.EqualFold(got, r.MD5) {
		return fmt.Errorf("%s: MD5 %s, want %s: the download is corrupt or the file changed upstream",
			r.URL, got, r.MD5)
	}
	if !isTar {
		// CreateTemp makes files private; the data is not.
		if err := os.Chmod(tmp.Name(), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), filepath.Join(dir, base))
	}
	// The archive is extracted to a staging folder inside dir and moved into place
	// only once it has been read whole and found to hold what it should, so a bad
	// archive leaves dir as it was.
	stage, err := os.MkdirTemp(dir, ".extract-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := extractTarGz(ctx, tmp.Name(), stage, base); err != nil {
		return err
	}
	for _, p := range r.Provides {
		if _, err := os.Stat(filepath.Join(stage, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("%s: archive has no %s", r.URL, p)
		}
	}
	return moveTree(stage, dir)
}

// download writes the body of a GET of rawURL to w and returns its hex MD5.
func (f *Fetcher) download(ctx context.Context, rawURL string, w io.Writer, progress func(done, total int64)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", err
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err // already names the method and URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", rawURL, resp.Status)
	}
	h := md5.New()
	dst := io.MultiWriter(w, h)
	if progress != nil {
		progress(0, resp.ContentLength)
		dst = io.MultiWriter(dst, &progressWriter{total: resp.ContentLength, f: progress})
	}
	if _, err := io.Copy(dst, resp.Body); err != nil {
		return "", fmt.Errorf("GET %s: %w", rawURL, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// progressWriter reports the running byte count of what is written through it.
type progressWriter struct {
	done, total int64
	f           func(done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	p.f(p.done, p.total)
	return len(b), nil
}

// extractTarGz extracts the gzipped tar file at src, called name in messages, into
// dir. Entries with absolute paths or ".." elements are rejected rather than skipped,
// since they mean the archive is not the one expected; so are links, which the data set
// archives never contain.
func extractTarGz(ctx context.Context, src, dir, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}

	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !safeEntryName(hdr.Name) {
			return fmt.Errorf("%s: entry %q points outside the target directory", name, hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeEntry(target, tr); err != nil {
				return fmt.Errorf("%s: entry %s: %w", name, hdr.Name, err)
			}
		case tar.TypeSymlink, tar.TypeLink:
			return fmt.Errorf("%s: entry %q is a link, which a data set archive should not contain", name, hdr.Name)
		default:
			// Devices, FIFOs and the like carry no data we need.
		}
	}
	// Drain the gzip stream so its checksum is verified too.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// safeEntryName reports whether a tar entry name stays inside the extraction
// directory: not empty, not absolute, and with no ".." element. Backslashes count as
// separators too, so a name crafted for Windows is caught as well.
func safeEntryName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
		return false
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return false
		}
	}
	return filepath.IsLocal(filepath.FromSlash(name))
}

// writeEntry writes r to a new file at path, creating its parent folders.
func writeEntry(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// moveTree moves the files under src to the same relative paths under dst, replacing
// files already there and merging folders, so a partly present data set is completed
// rather than refused.
func moveTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return nil
		}
		return os.Rename(p, target)
	})
}
