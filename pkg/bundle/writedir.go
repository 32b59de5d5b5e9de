package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// markerFile tells a directory vipctl wrote from one it must not replace.
// It is the first file of every new tree, so a tree a killed render left
// behind carries it too.
const markerFile = ".vipctl-render"

var markerData = []byte("written by vipctl render; the whole directory is replaced on every run\n")

// The hidden siblings a render builds the new tree in (.<out>.new-*) and,
// in earlier builds, moved the old one to (.<out>.old-*).
const (
	newInfix = ".new-"
	oldInfix = ".old-"
)

// newTreeMode is an output directory's mode when there was none before.
const newTreeMode = 0o755

// WriteDir replaces dir with exactly files, atomically: the new tree is
// built in a hidden sibling directory and swapped in with one renameat2
// (RENAME_EXCHANGE), so a reader sees either the old tree or the new one,
// and an error at any point, or the process killed, leaves dir as it was.
// dir is refused as CheckOutDir refuses it. A symbolic link is followed:
// the directory it points to is replaced and the link stays. The new
// directory keeps the old one's mode and owner. Trees an interrupted
// render left beside dir (.<dir>.new-*, with the marker) are removed.
func WriteDir(dir string, files []File) (err error) {
	out, err := outDir(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out.path), newTreeMode); err != nil {
		return err
	}
	tmp, unlock, err := newTree(out.path)
	if err != nil {
		return err
	}
	defer func() {
		// After a swap tmp holds the old tree; on failure, the new one.
		if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
			err = rmErr
		}
		unlock()
	}()
	// The marker first: whatever a killed render leaves, the next run can
	// tell it is vipctl's.
	w := treeWriter{root: tmp, made: map[string]bool{".": true}}
	if err := w.write(File{Path: markerFile, Mode: 0o644, Data: markerData}); err != nil {
		return err
	}
	for _, f := range files {
		if err := w.write(f); err != nil {
			return err
		}
	}
	// Last, so that a read-only mode (0555) does not stop the writes.
	if err := out.keepOwnerAndMode(tmp); err != nil {
		return err
	}
	if !out.exists {
		return os.Rename(tmp, out.path)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out.path, unix.RENAME_EXCHANGE); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("output %s is in use as a mount point or a process's root: name a directory inside it", dir)
		}
		return fmt.Errorf("swapping %s into place: %w", dir, err)
	}
	return nil
}

// CheckOutDir tells, before anything is rendered, whether WriteDir can
// replace dir: not the current directory or one that holds it (the swap
// would pull the tree from under the shell that runs vipctl), not the
// root directory or a mount point (which cannot be swapped), not a file,
// not a non-empty directory vipctl did not write, and a symbolic link
// only to a directory that passes the same checks.
func CheckOutDir(dir string) error {
	_, err := outDir(dir)
	return err
}

// outTarget is an output directory as WriteDir replaces it.
type outTarget struct {
	// path is dir with a symbolic link at its end resolved.
	path   string
	exists bool
	// mode and owner of the existing directory.
	mode     fs.FileMode
	uid, gid uint32
}

func outDir(dir string) (outTarget, error) {
	if dir == "" {
		return outTarget{}, errors.New("output directory not named")
	}
	out := outTarget{path: filepath.Clean(dir)}
	st, err := os.Lstat(out.path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, notAboveWorkingDir(dir, out.path)
	}
	if err != nil {
		return out, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(out.path)
		if err != nil {
			link, _ := os.Readlink(out.path)
			return out, fmt.Errorf("output %s is a symbolic link to %s, which does not exist: create that directory or name another", dir, link)
		}
		if st, err = os.Stat(target); err != nil {
			return out, err
		}
		if !st.IsDir() {
			return out, fmt.Errorf("output %s is a symbolic link to %s, which is not a directory", dir, target)
		}
		out.path = target
	}
	if !st.IsDir() {
		return out, fmt.Errorf("output %s exists and is not a directory", dir)
	}
	if err := notAboveWorkingDir(dir, out.path); err != nil {
		return out, err
	}
	if mount, err := isMountPoint(out.path); err != nil {
		return out, err
	} else if mount {
		return out, fmt.Errorf("output %s is a mount point, which cannot be swapped for a new directory: name a directory inside it", dir)
	}
	out.exists, out.mode = true, st.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		out.uid, out.gid = sys.Uid, sys.Gid
	}
	entries, err := os.ReadDir(out.path)
	if err != nil {
		return out, err
	}
	if len(entries) > 0 && !hasMarker(out.path) {
		return out, fmt.Errorf("output %s is not empty and was not written by vipctl render; refusing to replace it", dir)
	}
	return out, nil
}

// notAboveWorkingDir refuses the root directory and any directory that
// is, or holds, the current directory.
func notAboveWorkingDir(dir, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs == "/" {
		return fmt.Errorf("output %s is the root directory: name a directory for vipctl's files alone, e.g. ./out", dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(wd); err == nil {
		wd = real
	}
	switch {
	case wd == abs:
		return fmt.Errorf("output %s is the current directory, which vipctl would replace as a whole: name a directory inside it, e.g. %s", dir, filepath.Join(dir, "out"))
	case strings.HasPrefix(wd, abs+"/"):
		return fmt.Errorf("output %s holds the current directory %s, which vipctl would replace as a whole: name a directory of its own, e.g. %s", dir, wd, filepath.Join(dir, "out"))
	}
	return nil
}

// isMountPoint tells whether path is the root of a mount, bind mounts
// included (statx's STATX_ATTR_MOUNT_ROOT), or, where the kernel does not
// say, on another device than its parent.
func isMountPoint(path string) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var parent unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, filepath.Dir(path), 0, unix.STATX_BASIC_STATS, &parent); err != nil {
		return false, err
	}
	return stx.Dev_major != parent.Dev_major || stx.Dev_minor != parent.Dev_minor, nil
}

// hasMarker tells whether dir is a tree vipctl render wrote: the marker
// a regular file with vipctl's words in it.
func hasMarker(dir string) bool {
	p := filepath.Join(dir, markerFile)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 4096 {
		return false
	}
	data, err := os.ReadFile(p)
	return err == nil && bytes.HasPrefix(data, markerData[:len("written by vipctl render")])
}

// keepOwnerAndMode gives the new tree the existing directory's owner and
// mode (a new one gets newTreeMode), or refuses: a directory made 0700 or
// read-only stays so.
func (o outTarget) keepOwnerAndMode(tmp string) error {
	if !o.exists {
		return os.Chmod(tmp, newTreeMode)
	}
	var st unix.Stat_t
	if err := unix.Lstat(tmp, &st); err != nil {
		return err
	}
	if st.Uid != o.uid || st.Gid != o.gid {
		if err := os.Lchown(tmp, int(o.uid), int(o.gid)); err != nil {
			return fmt.Errorf("output %s belongs to uid %d gid %d, which the new directory cannot be given (%w): run as that user, or remove the directory", o.path, o.uid, o.gid, err)
		}
	}
	return os.Chmod(tmp, o.mode)
}

// newTree makes the hidden sibling the new tree is built in, locked for as
// long as this render runs, after removing the trees earlier renders left
// behind: those with the marker (or empty) and no live render's lock. The
// parent directory's lock makes the removal and the creation one step,
// so no render removes the tree another has just made.
func newTree(path string) (tmp string, unlock func(), err error) {
	parent, base := filepath.Dir(path), filepath.Base(path)
	release, err := lockDir(parent, true)
	if err != nil {
		return "", nil, err
	}
	defer release()
	removeLeftovers(parent, base)
	tmp, err = os.MkdirTemp(parent, "."+base+newInfix)
	if err != nil {
		return "", nil, err
	}
	unlock, err = lockDir(tmp, false)
	if err != nil {
		_ = os.Remove(tmp)
		return "", nil, err
	}
	return tmp, unlock, nil
}

// removeLeftovers removes what interrupted renders of base left in parent.
// A tree is removed only when it is provably vipctl's (the marker, or
// empty) and no running render holds it.
func removeLeftovers(parent, base string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		ours := strings.HasPrefix(name, "."+base+newInfix) || strings.HasPrefix(name, "."+base+oldInfix)
		if !e.IsDir() || !ours {
			continue
		}
		p := filepath.Join(parent, name)
		unlock, err := lockDir(p, false)
		if err != nil {
			continue // a live render's, or not ours to open
		}
		if hasMarker(p) {
			_ = os.RemoveAll(p)
		} else {
			_ = os.Remove(p) // only if empty
		}
		unlock()
	}
}

// lockDir takes an exclusive flock on a directory; wait says whether to
// wait for it. The kernel drops the lock when the process dies, so a
// killed render's tree is free to remove.
func lockDir(dir string, wait bool) (func(), error) {
	// Following a link is fine: the output's parent may be reached
	// through one, and removeLeftovers offers only what ReadDir called a
	// directory, not a link.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(fd, how); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "lock", Path: dir, Err: err}
	}
	return func() { _ = unix.Close(fd) }, nil
}

// treeWriter writes files under root, making each directory once.
type treeWriter struct {
	root string
	made map[string]bool
}

func (w *treeWriter) write(f File) error {
	clean := filepath.Clean(f.Path)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("output path %q escapes the output directory", f.Path)
	}
	// The missing directories top down, each with one mkdir: MkdirAll
	// would stat every one first, thousands of times for a large cluster.
	var missing []string
	for d := filepath.Dir(clean); !w.made[d]; d = filepath.Dir(d) {
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(filepath.Join(w.root, missing[i]), 0o755); err != nil {
			return err
		}
		w.made[missing[i]] = true
	}
	file, err := os.OpenFile(filepath.Join(w.root, clean), os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.Mode.Perm())
	if err != nil {
		return err
	}
	// The mode given at creation is filtered by the umask; scripts must
	// come out 0755.
	if err := file.Chmod(f.Mode.Perm()); err != nil {
		_ = file.Close()
		return err
	}
	if _, err := file.Write(f.Data); err != nil {
		_ = file.Close()
		return err
	}
	return file.Close()
}
