package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats every data-printing command accepts.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// addOutputFlag registers -o on a command; the value is checked by
// printData so an unknown format fails before any work is done only when
// the command calls checkOutput first.
func addOutputFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVarP(target, "output", "o", outputText, "output format: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{outputText, outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp
	})
}

func checkOutput(format string) error {
	switch format {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output: unknown format %q (text, json or yaml)", format)
}

// printReport prints a report: v as JSON or YAML, or its text.
func printReport(w io.Writer, format string, v any, text string) error {
	return printData(w, format, v, func(w io.Writer) error {
		_, err := io.WriteString(w, text)
		return err
	})
}

// printData writes v as JSON or YAML, or calls text for the human form.
func printData(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case outputText:
		return text(w)
	}
	return checkOutput(format)
}
