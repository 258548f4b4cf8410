package authorcli

import "github.com/spf13/cobra"

func newPreviewCmd() *cobra.Command { return &cobra.Command{Use: "preview"} }
