package update

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Request is a cluster file, loaded and with the quick edits made: what a
// `vipctl update` plans from. Nothing is written while it is built.
type Request struct {
	File   string
	Config *v1alpha1.ClusterVIPs
	// edited is the file's new text when there were quick edits.
	edited []byte
}

// Load reads the cluster file and makes the quick edits (in memory).
func Load(file string, edits []Edit) (*Request, error) {
	if len(edits) == 0 {
		c, err := v1alpha1.Load(file)
		if err != nil {
			return nil, err
		}
		return &Request{File: file, Config: c}, nil
	}
	original, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	edited, c, err := ApplyEdits(original, edits)
	if err != nil {
		// The edits are flags, the file is where they fail: name both.
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Request{File: file, Config: c, edited: edited}, nil
}

// RunOptions say how far a Run goes.
type RunOptions struct {
	DryRun bool
	// Force releases the addresses an edit takes from Services.
	Force bool
	// Show is given the plan before anything is written.
	Show func(*Plan) error
	// Log gets warnings and what was written.
	Log io.Writer
	// BootstrapNodes overrides the live Nodes as the bootstrap node list
	// of rewritten MachineConfigs (Plan.BootstrapNodes).
	BootstrapNodes []corev1.Node
}

// Run is one `vipctl update`: plan against the live config, Services and
// the other objects `vipctl render` writes, with the cluster's release when the file targets a newer one (a warning,
// or a refusal when the plan writes MachineConfigs the cluster would not
// parse), show the plan, then (unless a dry run or nothing changes) apply
// it and rewrite the file with the quick edits. The file is rewritten only
// after the cluster took the change.
func (c Cluster) Run(ctx context.Context, r *Request, o RunOptions) error {
	release := c.CheckRelease(ctx, r.Config)
	src, err := c.LiveSource(ctx)
	if err != nil {
		return fmt.Errorf("reading the live config: %w", err)
	}
	live, cm := src.Config, src.ConfigMap
	if len(src.Unknown) > 0 {
		return NewerFieldsError(cm, src.Unknown)
	}
	svcs, err := c.Services(ctx)
	if err != nil {
		return err
	}
	plan, err := Compute(live, r.Config, svcs)
	if err != nil {
		return fmt.Errorf("%s: %w", r.File, err)
	}
	plan.BootstrapNodes = o.BootstrapNodes
	plan.Object = src.Object
	objects, skipped, err := c.ObjectChanges(ctx, plan.Desired)
	if err != nil {
		return err
	}
	plan.Objects = objects
	if w := skipped.Warning(); w != "" {
		plan.Warnings = append(plan.Warnings, w)
	}
	if note := skipped.Note(); note != "" {
		_, _ = fmt.Fprintln(o.Log, "note:", note)
	}
	if release.Degrades && len(plan.Static) > 0 {
		plan.Release = &release
	} else if release.Message != "" {
		_, _ = fmt.Fprintln(o.Log, "warning:", release.Warning())
	}
	if err := o.Show(plan); err != nil {
		return err
	}
	if o.DryRun {
		return nil
	}
	if !plan.Empty() {
		if err := c.Apply(ctx, plan, cm, o.Force, o.Log); err != nil {
			if errors.Is(err, ErrOrphans) || errors.Is(err, ErrReleaseTooNew) {
				// A refusal of what the file asks for: say which file.
				return fmt.Errorf("%s: %w", r.File, err)
			}
			return err
		}
	}
	if r.edited == nil {
		return nil
	}
	if err := WriteFile(r.File, r.edited); err != nil {
		if plan.Empty() {
			return err
		}
		return fmt.Errorf("the cluster is updated but %s could not be rewritten: %w", r.File, err)
	}
	if !plan.Empty() {
		_, _ = fmt.Fprintf(o.Log, "rewrote %s\n", r.File)
	}
	return nil
}
