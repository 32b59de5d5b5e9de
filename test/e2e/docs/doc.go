// Package docs is the guides' suite: TestInstallGuide runs
// docs/install.md's marked blocks as a reader would (test/doccheck),
// against the namespace lab and the real apiserver. It needs root and
// runs alone: `go test ./test/e2e/docs/`.
package docs
