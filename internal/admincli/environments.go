package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newEnvironmentsGroup(a *app) *cobra.Command {
	return group("environments", []string{"environment", "env"}, "Protect deployment environments: approvals and allowed branches",
		newEnvironmentsListCmd(a), newEnvironmentsSetCmd(a), newEnvironmentsDeleteCmd(a))
}

func newEnvironmentsListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the environments that have a protection",
		Example: `  kici-admin environments list
  kici-admin environments list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var el apiv1.EnvironmentList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/environments", nil, nil, &el); err != nil {
				return fmt.Errorf("list environments: %w", err)
			}
			out := cmd.OutOrStdout()
			el.Environments = nonNil(el.Environments)
			if output == formatJSON {
				return writeJSON(out, el)
			}
			if len(el.Environments) == 0 {
				fmt.Fprintln(out, "no environments")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("NAME", "APPROVAL", "BRANCHES", "UPDATED", "UPDATED BY")
			for _, e := range el.Environments {
				approval, branches := "-", "(any)"
				if e.RequireApproval {
					approval = "required"
				}
				if len(e.Branches) > 0 {
					branches = strings.Join(e.Branches, ",")
				}
				tw.row(e.Name, approval, branches, ago(now, e.UpdatedAt), dash(e.UpdatedBy))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newEnvironmentsSetCmd(a *app) *cobra.Command {
	var (
		approval bool
		branches []string
		output   string
	)
	cmd := &cobra.Command{
		Use:   "set NAME [--require-approval] [--branches GLOB,...]",
		Short: "Set an environment's protection",
		Long: `Set the protection of the deployment environment NAME, the one a job names
with environment: NAME, replacing what it had.

--require-approval holds each job of the environment in awaiting_approval
until someone with run.approve approves its run (kici-admin runs approve ID,
or the Approve button of the run's page). --branches limits the runs that
may deploy to the environment to those of the branches matching one of the
globs (main, release/*); a job of any other run fails, and a pull request's
run never matches. Without them the environment has no protection, as one
never set; its secrets (secrets set --environment) are still its jobs' only.`,
		Example: `  kici-admin environments set production --require-approval --branches main
  kici-admin environments set staging --branches 'main,release/*'`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			for _, b := range branches {
				if strings.TrimSpace(b) == "" {
					return usagef("--branches: an empty glob")
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var e apiv1.Environment
			in := apiv1.EnvironmentRequest{RequireApproval: approval, Branches: nonNil(branches)}
			if err := c.do(cmd.Context(), http.MethodPut, "/api/v1/environments/"+url.PathEscape(name), nil, in, &e); err != nil {
				return fmt.Errorf("set environment %s: %w", name, err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, e)
			}
			what := "no approval"
			if e.RequireApproval {
				what = "approval required"
			}
			where := "any branch"
			if len(e.Branches) > 0 {
				where = "branches " + strings.Join(e.Branches, ", ")
			}
			fmt.Fprintf(out, "environment %s set: %s, %s\n", e.Name, what, where)
			return nil
		},
	}
	cmd.Flags().BoolVar(&approval, "require-approval", false, "hold each job of the environment until someone approves it")
	cmd.Flags().StringSliceVar(&branches, "branches", nil, "only runs of branches matching one of these `GLOB`s may deploy (default any)")
	addOutputFlag(cmd, &output)
	return cmd
}

func newEnvironmentsDeleteCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Remove an environment's protection (its secrets stay)",
		Example: `  kici-admin environments delete staging`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/environments/"+url.PathEscape(name), nil, nil, nil); err != nil {
				return fmt.Errorf("delete environment %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "environment %s deleted: its jobs run without approval or branch limit\n", name)
			return nil
		},
	}
	return cmd
}
