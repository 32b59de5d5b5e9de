package diagnose

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
)

// The node's nftables, in two files under dir/network:
//   - nftables.txt, every table as `nft list table` prints it, one by one:
//     the node's other rules (OVN-Kubernetes, a firewall) meet vipctl's
//     there, in the syntax support reads;
//   - nftables-vipctl.json, vipctl's own tables read over netlink, whole
//     (chains, rule handles, sets with their elements): a node may have no
//     nft at all, and nft 1.0.6, the image's, aborted on the handover
//     tables older vipctl releases wrote (before 2026-12-01).
const (
	nftablesText = "nftables.txt"
	nftablesOwn  = "nftables-vipctl.json"
)

// nftTimeout bounds listing every table with nft.
const nftTimeout = 10 * time.Second

func gatherNFTables(ctx context.Context, t host.Target, a *Archive, dir string) {
	if own, err := dataplane.ReadOwnTables(t); err != nil {
		a.fail(nftablesOwn, err)
	} else {
		a.addJSON(path.Join(dir, "network", nftablesOwn), own)
	}
	tables, err := dataplane.ListTables(t)
	if err != nil {
		a.fail(nftablesText, err)
		return
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		a.fail(nftablesText, fmt.Errorf("no nft to print the tables (vipctl's image has one); vipctl's own are in %s: %w", nftablesOwn, err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, nftTimeout)
	defer cancel()
	var text bytes.Buffer
	err = t.InNetns(func() error {
		// One table at a time: one nft cannot print does not hide the
		// others. nft starts on this thread, inside the namespace.
		for _, tb := range tables {
			var out, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, nft, "list", "table", tb.Family, tb.Name)
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				why := fmt.Errorf("nft list table %s %s: %w: %s", tb.Family, tb.Name, err, strings.TrimSpace(stderr.String()))
				a.fail(nftablesText, why)
				where := ""
				if slices.Contains(dataplane.OwnTables(), tb) {
					where = "; it is in " + nftablesOwn
				}
				fmt.Fprintf(&text, "# table %s %s: nft could not print it (%s)%s\n\n", tb.Family, tb.Name, err, where)
				continue
			}
			text.Write(out.Bytes())
		}
		return nil
	})
	if err != nil {
		a.fail(nftablesText, err)
		return
	}
	a.add(path.Join(dir, "network", nftablesText), text.Bytes())
}
