package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/version"
)

type versionInfo struct {
	Version string `json:"version"`
	// Release is false for a development build, whose image no registry
	// publishes (hack/release.sh refuses to ship one as a release).
	Release   bool   `json:"release"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Image is what spec.images defaults to when this binary renders.
	Image string `json:"image"`
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
			info := versionInfo{
				Version: version.Get(), Release: version.IsRelease(version.Get()),
				GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
				Image: version.Image(),
			}
			return printData(streams.Out, output, info, func(w io.Writer) error {
				build := ""
				if !info.Release {
					build = ", a development build"
				}
				_, err := fmt.Fprintf(w, "vipctl %s (%s, %s)%s\nimage: %s\n", info.Version, info.GoVersion, info.Platform, build, info.Image)
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
