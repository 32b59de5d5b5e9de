package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/installercheck"
	"github.com/vipctl/vipctl/pkg/nodelist"
)

// addInstallerFlags are validate's and render's --install-config and
// --agent-config: the installer's files the cluster file must agree with.
func addInstallerFlags(cmd *cobra.Command, files *nodelist.Installer) {
	f := cmd.Flags()
	f.StringVar(&files.InstallConfig, "install-config", "", "the installer's install-config.yaml: refuse a cluster file that disagrees with it (name, domain, VIPs, machine networks, load balancer)")
	f.StringVar(&files.AgentConfig, "agent-config", "", "the agent-based installer's agent-config.yaml: its hosts must be in --nodes, its rendezvousIP a control-plane node's")
	markNonEmpty(cmd, "install-config", "agent-config")
}

// checkInstallerFlags refuses --agent-config alone, before anything is
// read: the load balancer and the machine networks are install-config's.
func checkInstallerFlags(files nodelist.Installer) error {
	if files.AgentConfig != "" && files.InstallConfig == "" {
		return errors.New("--agent-config: give --install-config too: it holds the platform, the VIPs and the machine networks the cluster file is checked against")
	}
	return nil
}

// checkInstaller refuses a cluster file, and a node list, that disagrees
// with the installer's files, naming every disagreement with both files'
// fields; nothing when no installer file is given.
func checkInstaller(files nodelist.Installer, in installercheck.Input) error {
	if files.InstallConfig == "" {
		return nil
	}
	var err error
	if in.Files, err = nodelist.ReadInstaller(files); err != nil {
		return err
	}
	if errs := installercheck.Check(in); len(errs) > 0 {
		return fmt.Errorf("%s disagrees with the installer's files: %w", in.ConfigPath, &v1alpha1.ValidationError{Errors: errs})
	}
	return nil
}
