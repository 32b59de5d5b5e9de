package onnode

import "io/fs"

// File is one file to lay on a node: an absolute path on the node, its mode
// and its content.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}
