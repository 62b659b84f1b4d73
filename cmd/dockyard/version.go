package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/dockyard-dev/dockyard/pkg/repository/embedded"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of Dockyard this command installs, and of what it installs with it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout())
		},
	}
}

// printVersion prints the providers of the repository the command carries, and how the command
// was built (its module version, or the commit of the checkout it was built in).
func printVersion(w io.Writer) error {
	r, err := embedded.Repository()
	if err != nil {
		return err
	}
	providers, certManager, err := r.Contents()
	if err != nil {
		return err
	}
	for _, p := range providers {
		if p.Name == "dockyard" {
			fmt.Fprintf(w, "dockyard %s\n", p.Version)
		}
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		built := info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				built += " " + s.Value
			case "vcs.modified":
				if s.Value == "true" {
					built += " (modified)"
				}
			}
		}
		fmt.Fprintf(w, "  built: %s, %s\n", built, info.GoVersion)
	}
	for _, p := range providers {
		if p.Name != "dockyard" {
			fmt.Fprintf(w, "  %s %s: %s\n", p.Type, p.Name, p.Version)
		}
	}
	fmt.Fprintf(w, "  cert-manager: %s\n", certManager)
	return nil
}
