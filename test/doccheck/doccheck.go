// Package doccheck reads the docs the way their tests need: the fenced
// blocks of a guide with the doctest mark that says what to do with each
// (test/e2e TestInstallGuide runs them), the files a doc cites, and the
// releases of vipctl and of its peers a doc names.
//
// A mark is an HTML comment on the line before a fence (blank lines
// between are allowed), invisible once the Markdown is rendered:
//
//	<!-- doctest -->                 run the block (bash -euo pipefail)
//	<!-- doctest: cluster -->        run it against the lab cluster
//	<!-- doctest: host -->           run it on a host of the machine network
//	<!-- doctest: file NAME -->      write the block's text to NAME
//	<!-- doctest: skip, REASON -->   do not run it, for REASON
//
// docs/lab.md says what each environment holds.
package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/mod/semver"
)

// Block is one fenced code block.
type Block struct {
	// Line is the line of the opening fence, from 1.
	Line int
	// Lang is the fence's info string's first word (sh, yaml, ...).
	Lang string
	Text string
	// Marked is true when a doctest mark precedes the block; Mark is its
	// directive, Arg what follows the directive ("" and "" for a plain
	// run).
	Marked    bool
	Mark, Arg string
}

// Shell tells whether the block is a shell session or script.
func (b Block) Shell() bool {
	switch b.Lang {
	case "sh", "shell", "bash", "console":
		return true
	}
	return false
}

var markRE = regexp.MustCompile(`^<!--\s*doctest(?::\s*(.*?))?\s*-->$`)

// Directives a mark may carry.
const (
	Run     = ""
	Cluster = "cluster"
	Host    = "host"
	File    = "file"
	Skip    = "skip"
)

// Blocks splits Markdown into its fenced blocks (``` or ~~~), each with
// the mark before it. A malformed mark (an unknown directive, a file with
// no name, a skip with no reason) is an error naming its line.
func Blocks(md []byte) ([]Block, error) {
	lines := strings.Split(string(md), "\n")
	var out []Block
	var mark *Block // the last mark seen, until a block or text comes
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if m := markRE.FindStringSubmatch(line); m != nil {
			b, err := parseMark(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			mark = &b
			continue
		}
		fence := ""
		for _, f := range []string{"```", "~~~"} {
			if strings.HasPrefix(line, f) {
				fence = f
			}
		}
		if fence == "" {
			if line != "" {
				mark = nil
			}
			continue
		}
		b := Block{Line: i + 1, Lang: strings.Fields(strings.TrimPrefix(line, fence) + " x")[0]}
		if b.Lang == "x" {
			b.Lang = ""
		}
		if mark != nil {
			b.Marked, b.Mark, b.Arg = true, mark.Mark, mark.Arg
			mark = nil
		}
		var text []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), fence); i++ {
			text = append(text, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the block never ends", b.Line)
		}
		b.Text = strings.Join(text, "\n") + "\n"
		out = append(out, b)
	}
	return out, nil
}

func parseMark(s string) (Block, error) {
	word, arg, _ := strings.Cut(s, " ")
	word = strings.TrimSuffix(word, ",")
	arg = strings.TrimSpace(arg)
	b := Block{Mark: word, Arg: arg}
	switch word {
	case Run, Cluster, Host:
		if arg != "" {
			return b, fmt.Errorf("doctest: %s takes nothing after it, got %q", word, arg)
		}
	case File:
		if arg == "" || strings.ContainsAny(arg, " /") {
			return b, fmt.Errorf("doctest: file wants a file name in the working directory, got %q", arg)
		}
	case Skip:
		if arg == "" {
			return b, fmt.Errorf("doctest: skip wants a reason (<!-- doctest: skip, needs oc -->)")
		}
	default:
		return b, fmt.Errorf("doctest: unknown directive %q (want cluster, host, file NAME or skip, REASON)", word)
	}
	return b, nil
}

// docRef is a Markdown file name as docs cite them: docs/x.md or x.md.
var docRef = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// MissingCitations lists the Markdown files the doc at path (inside the
// repository at root) cites that do not exist: "docs/x.md" from the
// repository's root, a bare "x.md" beside the doc or in docs/. Paths of
// other repositories (owner/repo/x.md) are not this repository's and
// are left alone.
func MissingCitations(root, path string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	var missing []string
	seen := map[string]bool{}
	for _, ref := range docRef.FindAllString(string(data), -1) {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		var candidates []string
		switch {
		case strings.HasPrefix(ref, "docs/"):
			candidates = []string{ref}
		case strings.Contains(ref, "/"):
			continue
		default:
			candidates = []string{filepath.Join(filepath.Dir(path), ref), filepath.Join("docs", ref), ref}
		}
		found := false
		for _, c := range candidates {
			if _, err := os.Stat(filepath.Join(root, c)); err == nil {
				found = true
			}
		}
		if !found {
			missing = append(missing, ref)
		}
	}
	return missing, nil
}

// versionMention finds where a doc names a version of vipctl itself
// rather than of another project (kube-vip v0.9.2 is not one): in an
// image reference of vipctl's repository path, after "vipctl ", as
// VERSION=, in a URL of vipctl's repository pinned to a tag, in a
// release directory, after git tag, and in a changelog heading. A
// version's dots are single: a sentence's full stop and a compare range's
// "..." are not part of it.
var versionMention = regexp.MustCompile(`(?:vipctl/vipctl:|\bvipctl |\bVERSION=|github\.com/vipctl/vipctl/(?:blob|tree|releases/tag|releases/download|compare)/|\.\.\.|bin/release/|\bgit tag (?:-[as] )?|^## \[)(v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?(?:\+[0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?)`)

// releasePrefix is the release a version names or was built after: the
// version itself, or what precedes a development build's suffix
// (v0.1.0-3-ge6f8dbd-dirty, v0.1.0-next).
var releasePrefix = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(?:-(?:alpha|beta|rc)\.[0-9]+)?`)

// Mention is a version of vipctl a doc names.
type Mention struct {
	Line int
	// Version as written; Release the release it is or follows.
	Version, Release string
}

// VersionMentions lists the versions of vipctl the Markdown names.
func VersionMentions(md []byte) []Mention {
	var out []Mention
	for i, line := range strings.Split(string(md), "\n") {
		for _, m := range versionMention.FindAllStringSubmatch(line, -1) {
			v := m[1]
			out = append(out, Mention{Line: i + 1, Version: v, Release: releasePrefix.FindString(v)})
		}
	}
	return out
}

// PeersEnv pins the releases of the peers the benchmarks measure vipctl
// against, from the repository's root.
const PeersEnv = "hack/peers.env"

// peerVersionVars are PeersEnv's variables that pin a peer's release, by
// the peer's name as the docs write it.
var peerVersionVars = []struct{ name, peer string }{
	{"KUBE_VIP_VERSION", "kube-vip"},
	{"METALLB_VERSION", "MetalLB"},
}

// PinnedPeers reads the release PeersEnv pins for each peer, by the
// peer's name (kube-vip, MetalLB). A variable that is missing or not a
// release (vMAJOR.MINOR.PATCH) is an error naming it.
func PinnedPeers(root string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(root, PeersEnv))
	if err != nil {
		return nil, err
	}
	pinned := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		for _, v := range peerVersionVars {
			if v.name != name {
				continue
			}
			value = strings.Trim(value, `"'`)
			if !semver.IsValid(value) || semver.Canonical(value) != value {
				return nil, fmt.Errorf("%s:%d: %s=%q is not a release (vMAJOR.MINOR.PATCH)", PeersEnv, i+1, name, value)
			}
			pinned[v.peer] = value
		}
	}
	for _, v := range peerVersionVars {
		if pinned[v.peer] == "" {
			return nil, fmt.Errorf("%s: no %s", PeersEnv, v.name)
		}
	}
	return pinned, nil
}

// peerMention finds where a doc names a release of kube-vip or MetalLB:
// "kube-vip v1.2.3", "MetalLB's v0.16.1", "kube-vip (v1.2.3)",
// "metallb@v0.16.1", a benchmark line's "peer=kube-vip version=v1.2.3";
// any case, and the name and the release on two lines of a paragraph too.
var peerMention = regexp.MustCompile(`(?i)\b(kube-vip|metallb)` + "`?" + `(?:'s|’s)?(?:\s+version=|\s+\(?|@)(v[0-9]+\.[0-9]+\.[0-9]+(?:-(?:alpha|beta|rc)\.[0-9]+)?)\b`)

// PeerMention is a release of a peer a doc names.
type PeerMention struct {
	// Line is the line the peer's name is on, from 1.
	Line int
	// Peer as PinnedPeers names it; Version as written.
	Peer, Version string
}

// PeerMentions lists the releases of kube-vip and MetalLB the Markdown
// names.
func PeerMentions(md []byte) []PeerMention {
	text := string(md)
	var out []PeerMention
	for _, m := range peerMention.FindAllStringSubmatchIndex(text, -1) {
		peer := "MetalLB"
		if strings.EqualFold(text[m[2]:m[3]], "kube-vip") {
			peer = "kube-vip"
		}
		out = append(out, PeerMention{Line: 1 + strings.Count(text[:m[0]], "\n"), Peer: peer, Version: text[m[4]:m[5]]})
	}
	return out
}
