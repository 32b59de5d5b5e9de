// Package diagnose gathers what support needs to understand a vipctl
// installation into one tar.gz (`vipctl diagnose`): from the API (Cluster)
// the version, the config, the status, the nodes' published annotations,
// vipctl's Events and its pods' logs; on a node (Local) the files the
// sidecar renders and keeps, the daemons' own answers (keepalived's state
// dumps among them), the addresses on the node's interfaces and its
// nftables. Its rules: every byte that enters an archive
// passes redact.Bytes first; what cannot be gathered is recorded in the archive
// (problems.json) instead of failing the whole; the archive file appears
// whole or not at all, and never over another unless asked.
package diagnose

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/redact"
	"github.com/vipctl/vipctl/pkg/version"
)

// Root is the directory every archive's entries lie under, so that
// unpacking one does not litter the current directory, and unpacking
// several (the cluster's and each node's) merges them.
const Root = "vipctl-diagnose"

// ProblemsFile lists what could not be gathered, under each archive's
// directory (Archive.Dir).
const ProblemsFile = "problems.json"

// maxFile bounds one gathered file or log: a support bundle that cannot
// be mailed helps nobody.
const maxFile = 8 << 20

// Problem is one thing that could not be gathered, and why.
type Problem struct {
	What  string `json:"what"`
	Error string `json:"error"`
}

// Archive is the content of one bundle, in memory until written.
type Archive struct {
	// Dir is where this run's own records (version.json, problems.json)
	// go: "" for the cluster's, nodes/NODE/local for a node's, so that
	// bundles from both merge without a clash.
	Dir string
	// Time is when the gathering started; every entry carries it.
	Time     time.Time
	files    map[string][]byte
	order    []string
	problems []Problem
}

// newArchive starts an archive whose own records go under dir.
func newArchive(dir string, now time.Time) *Archive {
	a := &Archive{Dir: dir, Time: now, files: map[string][]byte{}}
	a.addJSON(path.Join(dir, "version.json"), version.Current())
	return a
}

// add records a file, redacted, and at most maxFile bytes long.
func (a *Archive) add(name string, data []byte) {
	if len(data) > maxFile {
		data = append(data[:maxFile:maxFile], fmt.Sprintf("\n[vipctl diagnose: cut at %d bytes]\n", maxFile)...)
	}
	if _, ok := a.files[name]; !ok {
		a.order = append(a.order, name)
	}
	a.files[name] = redact.Bytes(data)
}

func (a *Archive) addJSON(name string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		a.fail(name, err)
		return
	}
	a.add(name, append(b, '\n'))
}

func (a *Archive) addYAML(name string, v any) {
	b, err := yaml.Marshal(v)
	if err != nil {
		a.fail(name, err)
		return
	}
	a.add(name, b)
}

// fail records that what could not be gathered.
func (a *Archive) fail(what string, err error) {
	a.problems = append(a.problems, Problem{What: what, Error: string(redact.Bytes([]byte(err.Error())))})
}

// Problems are what could not be gathered so far.
func (a *Archive) Problems() []Problem { return a.problems }

// Names lists the archive's files (without Root), sorted.
func (a *Archive) Names() []string {
	out := append([]string(nil), a.order...)
	sort.Strings(out)
	return out
}

// File is one file's content (its name without Root).
func (a *Archive) File(name string) ([]byte, bool) {
	b, ok := a.files[name]
	return b, ok
}

// Merge adds the files of another bundle (a node's, written by
// `diagnose --local`) to this one. A name both hold is an error: the
// bundles come from different runs and neither is to be lost.
func (a *Archive) Merge(r io.Reader) error {
	other, err := Read(r)
	if err != nil {
		return err
	}
	for _, name := range other.order {
		if _, ok := a.files[name]; ok {
			return fmt.Errorf("both bundles hold %s", name)
		}
		a.add(name, other.files[name])
	}
	return nil
}

// Read loads a bundle as Write wrote it, its problems list as a file.
func Read(r io.Reader) (*Archive, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a vipctl diagnose bundle (tar.gz): %w", err)
	}
	a := &Archive{files: map[string][]byte{}}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the bundle: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name, ok := strings.CutPrefix(h.Name, Root+"/")
		if !ok || !fs.ValidPath(name) {
			return nil, fmt.Errorf("not a vipctl diagnose bundle: entry %q is not under %s/", h.Name, Root)
		}
		data, err := io.ReadAll(io.LimitReader(tr, 2*maxFile))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", h.Name, err)
		}
		a.files[name] = data
		a.order = append(a.order, name)
	}
}

// Write writes the archive as a tar.gz, its problems list included.
func (a *Archive) Write(w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	files := a.files
	if len(a.problems) > 0 {
		files = make(map[string][]byte, len(a.files)+1)
		for k, v := range a.files {
			files[k] = v
		}
		b, err := json.MarshalIndent(a.problems, "", "  ")
		if err != nil {
			return err
		}
		files[path.Join(a.Dir, ProblemsFile)] = append(b, '\n')
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &tar.Header{Name: Root + "/" + n, Mode: 0o600, Size: int64(len(files[n])), ModTime: a.Time, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// ErrExists refuses to write over a file the caller did not ask to replace.
var ErrExists = errors.New("exists")

// OutputPath is where a bundle named p is written, checked before anything
// is gathered: p itself, or with replace the file a symbolic link at p
// points to (the link stays). It refuses a directory (the bundle is one
// file), a directory that does not exist to hold it, a symbolic link to
// nothing, and without replace anything at p (wrapping ErrExists).
func OutputPath(p string, replace bool) (string, error) {
	st, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		dir := filepath.Dir(p)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s: no directory %s to write it in", p, dir)
		}
		return p, nil
	case err != nil:
		return "", err
	}
	target := p
	if st.Mode()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			link, _ := os.Readlink(p)
			return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist", p, link)
		}
		if st, err = os.Stat(real); err != nil {
			return "", err
		}
		target = real
	}
	switch {
	case st.IsDir():
		return "", fmt.Errorf("%s is a directory: name the bundle's file, e.g. %s", p, filepath.Join(p, "vipctl-diagnose.tar.gz"))
	case !replace:
		return "", fmt.Errorf("%s %w", p, ErrExists)
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file: name another", p)
	}
	return target, nil
}

// WriteFile writes the archive to path through a temporary file in the
// same directory: the path holds the old file or the whole new one, never
// half of one. Without replace an existing file is kept and the error
// wraps ErrExists (checked when the file is put in place, so a file
// created meanwhile is not clobbered either). The bundle is the user's
// alone (0600): configs and logs name the cluster's inner workings.
func (a *Archive) WriteFile(p string, replace bool) error {
	p, err := OutputPath(p, replace)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once linked or renamed
	var buf bytes.Buffer
	if err := a.Write(&buf); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp.Name(), p)
	}
	// A hard link fails when the name exists: no window between a
	// check and a rename.
	err = os.Link(tmp.Name(), p)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %w", p, ErrExists)
	}
	return err
}
