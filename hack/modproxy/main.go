// Command modproxy serves one module version from its source tree as a
// Go module proxy directory (GOPROXY=file://DIR), for a dependency the
// module proxy refuses but whose project publishes its source.
//
//	modproxy -dir SRC -module PATH -version V -o DIR
//
// writes DIR/PATH/@v/{list,V.info,V.mod,V.zip}: the zip made from SRC the
// way the go command makes module zips (no .git, no nested modules, no
// vendor directories but the top one), so its hash is what a go.sum
// records for that version when SRC is the tagged source. The go command
// checks that hash against the dependent module's go.sum before it builds
// anything: a source that differs from the release by one byte is
// refused there, not here. It prints the zip's hash (h1:…).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", "", "the module's source tree (its go.mod at the root)")
	path := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version to serve it as")
	out := flag.String("o", "", "the proxy directory to write into")
	flag.Parse()
	if *dir == "" || *path == "" || *version == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	h, err := write(*dir, module.Version{Path: *path, Version: *version}, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	fmt.Println(h)
}

// write lays out m, made from dir, under the proxy directory out and
// returns the zip's go.sum hash.
func write(dir string, m module.Version, out string) (string, error) {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	at := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return "", err
	}
	zipPath := filepath.Join(at, m.Version+".zip")
	f, err := os.CreateTemp(at, ".zip-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if err := zip.CreateFromDir(f, m, dir); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("zipping %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	h, err := dirhash.HashZip(f.Name(), dirhash.Hash1)
	if err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Unix(0, 0).UTC()})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{m.Version + ".mod": gomod, m.Version + ".info": info, "list": []byte(m.Version + "\n")} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return h, os.Rename(f.Name(), zipPath)
}
