package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/version"
)

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
			info := version.Current()
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
