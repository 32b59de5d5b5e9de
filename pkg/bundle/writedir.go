package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// markerFile tells a directory vipctl wrote from one it must not replace.
const markerFile = ".vipctl-render"

// WriteDir replaces dir with exactly files, atomically: the new tree is
// built in a sibling directory and swapped in with one renameat2
// (RENAME_EXCHANGE), so a reader sees either the old tree or the new one,
// and an error at any point leaves dir as it was. A non-empty dir that
// vipctl did not write is refused rather than replaced.
func WriteDir(dir string, files []File) (err error) {
	dir = filepath.Clean(dir)
	if err := checkReplaceable(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	defer func() {
		// After a swap tmp holds the old tree; on failure, the new one.
		if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, f := range append(files, File{Path: markerFile, Mode: 0o644, Data: []byte("written by vipctl render; the whole directory is replaced on every run\n")}) {
		if err := writeFile(tmp, f); err != nil {
			return err
		}
	}
	if _, statErr := os.Lstat(dir); errors.Is(statErr, os.ErrNotExist) {
		return os.Rename(tmp, dir)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("swapping %s into place: %w", dir, err)
	}
	return nil
}

func writeFile(root string, f File) error {
	clean := filepath.Clean(f.Path)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("output path %q escapes the output directory", f.Path)
	}
	full := filepath.Join(root, clean)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
		return err
	}
	// WriteFile's mode is filtered by the umask; scripts must come out 0755.
	return os.Chmod(full, f.Mode.Perm())
}

func checkReplaceable(dir string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		return fmt.Errorf("output %s is not empty and was not written by vipctl render; refusing to replace it", dir)
	}
	return nil
}
