package runtimecfg

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// LastGood is the sidecar's last successful view of the cluster, kept on
// the node (onnode.LastGoodPath) so that `--once` after a pod restart, a
// reboot or a whole-cluster cold start renders what the node last served:
// the Service addresses, the Nodes that joined since render time, the
// routers' placement and the day-2 pools. Without it a restarted node
// would preempt its pool instances holding only their anchors, and the
// Services' addresses would answer nowhere until the API does.
type LastGood struct {
	// Node wrote the file; a file that names another node (a disk moved
	// to a renamed machine) is not this node's view.
	Node string `json:"node"`
	// Config is the effective config of that sync. Only its day-2 parts
	// are used: the static file on disk stays authoritative for the rest.
	Config json.RawMessage `json:"config"`
	// State is the cluster state of that sync.
	State cluster.State `json:"state"`
	// Unknown are the fields of Config this vipctl does not know, ignored
	// (LoadLastGood): a newer one wrote the view before a rollback.
	Unknown v1alpha1.UnknownFields `json:"-"`
}

// SaveLastGood records a successful sync, atomically and only when it
// differs from what is recorded (a sync that changed nothing writes
// nothing: the node's disk is not worn by every resync).
func SaveLastGood(t host.Target, node string, c *v1alpha1.ClusterVIPs, st cluster.State) (bool, error) {
	cfg, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	data, err := json.MarshalIndent(LastGood{Node: node, Config: cfg, State: st}, "", "  ")
	if err != nil {
		return false, err
	}
	return t.WriteFile(onnode.LastGoodPath, append(data, '\n'), 0o600)
}

// LoadLastGood reads the recorded view, its config decoded as the
// ConfigMap's (a stored copy: the fields a newer vipctl wrote before a
// rollback are named in Unknown and ignored), and when it was written. A
// missing file is fs.ErrNotExist.
func LoadLastGood(t host.Target) (*LastGood, *v1alpha1.ClusterVIPs, time.Time, error) {
	path := t.Path(onnode.LastGoodPath)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	var lg LastGood
	if err := json.Unmarshal(data, &lg); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("%s: %w", onnode.LastGoodPath, err)
	}
	c, unknown, err := v1alpha1.ParseStored(lg.Config)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("%s: config: %w", onnode.LastGoodPath, err)
	}
	lg.Unknown = unknown
	return &lg, c, fi.ModTime(), nil
}
