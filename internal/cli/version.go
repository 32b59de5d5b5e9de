package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/version"
)

type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewVersionCommand prints the build's version.
func NewVersionCommand(streams IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print vipctl's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			info := versionInfo{Version: version.Get(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			return printData(streams.Out, output, info, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "vipctl %s (%s, %s)\n", info.Version, info.GoVersion, info.Platform)
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
