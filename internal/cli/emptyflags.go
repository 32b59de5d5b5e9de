package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// nonEmptyAnnotation marks a flag whose empty value means nothing: a
// file, a node list. Flags cobra requires carry BashCompOneRequiredFlag
// and count as marked too.
const nonEmptyAnnotation = "vipctl/non-empty"

// markNonEmpty declares flags that name something and are wrong when
// given as "": `--nodes ""` used to render as if --nodes were absent,
// `-f ""` to say "open : no such file or directory".
func markNonEmpty(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.Flags().SetAnnotation(n, nonEmptyAnnotation, []string{"true"})
	}
}

// checkEmptyFlags refuses every required or non-empty flag given as "",
// naming each, before the command runs (the root's PersistentPreRunE).
func checkEmptyFlags(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		_, marked := f.Annotations[nonEmptyAnnotation]
		_, required := f.Annotations[cobra.BashCompOneRequiredFlag]
		if (marked || required) && f.Changed && f.Value.String() == "" {
			errs = append(errs, fmt.Errorf("--%s \"\": empty: %s", f.Name, f.Usage))
		}
	})
	return errors.Join(errs...)
}
