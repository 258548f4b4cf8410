package admincli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// runsLogsFlags are the options of `kici-admin runs logs`.
type runsLogsFlags struct {
	job    string
	step   int
	follow bool
	raw    bool
}

func newRunsLogsCmd(a *app) *cobra.Command {
	var f runsLogsFlags
	cmd := &cobra.Command{
		Use:   "logs ID [--job JOB [--step N]] [-f] [--raw]",
		Short: "Print the stored log lines of a run, or follow them",
		Long: `Print the log lines stored for run ID: every job's, in the run's job order,
each line as "JOB | TEXT"; or, with --job (a job's name, as runs show lists
it, or its id), that job's lines alone and unprefixed, optionally of one
step only.

-f keeps reading until every job shown has ended and all its lines were
printed. It asks the logs endpoint for lines after the last one read every
200ms, so it never repeats or skips a line, whenever it is started.

Steps are numbered from 0, as runs show lists them and the API's
steps[].index has them; --step -1 is the job's setup output (the checkout)
and --step -2 its provisioning events.

Control characters in the lines (ESC, CR and the other C0 codes but tab,
DEL and C1 codes) are printed escaped, as \x1b, \r, \x07 …, so that a job's
output cannot drive your terminal (set its title, write the clipboard with
OSC 52, overwrite the screen). --raw prints the lines as they were stored.`,
		Example: `  kici-admin runs logs r-102
  kici-admin runs logs r-102 --job "test (shard=1)" --step 1
  kici-admin runs logs r-103 -f`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var step *int
			if cmd.Flags().Changed("step") {
				if f.job == "" {
					return usagef("--step needs --job")
				}
				step = &f.step
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			if err := a.printLogs(cmd.Context(), c, cmd.OutOrStdout(), id, &f, step); err != nil {
				return fmt.Errorf("read logs of run %q: %w", id, err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.job, "job", "", "only this `JOB` (its name or id), printed without the job prefix")
	fl.IntVar(&f.step, "step", 0, "only step `N` of --job: its number as runs show lists it, from 0 (-1: setup, -2: provisioning)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new lines until the jobs end")
	fl.BoolVar(&f.raw, "raw", false, "print control characters as they are instead of escaped (lets job output drive the terminal)")
	return cmd
}

// printLogs prints the lines of run id's jobs (or of f.job), once or,
// with f.follow, until every job has ended.
func (a *app) printLogs(ctx context.Context, c *client, w io.Writer, id string, f *runsLogsFlags, step *int) error {
	run, err := c.getRun(ctx, id)
	if err != nil {
		return err
	}
	jobs := run.Jobs
	if f.job != "" {
		j, ok := findJob(jobs, f.job)
		if !ok {
			names := make([]string, len(jobs))
			for i, j := range jobs {
				names[i] = strconv.Quote(j.Name)
			}
			return fmt.Errorf("no job %q; its jobs are %s", f.job, dash(strings.Join(names, ", ")))
		}
		jobs = []apiv1.Job{j}
	}
	if len(jobs) == 0 {
		fmt.Fprintf(w, "run %s has no jobs\n", id)
		return nil
	}
	readers := make([]*logReader, len(jobs))
	for i, j := range jobs {
		key := j.ID
		if key == "" {
			key = j.Name
		}
		readers[i] = &logReader{c: c, runID: id, job: j.Name, key: key, step: step, prefix: f.job == "", raw: f.raw}
	}
	for {
		open := 0
		for _, r := range readers {
			if err := r.drain(ctx, w); err != nil {
				return err
			}
			if !r.done {
				open++
			}
		}
		if !f.follow || open == 0 {
			return nil
		}
		if err := a.env.sleep(ctx, a.env.pollInterval); err != nil {
			return err
		}
	}
}

// findJob finds a job by name or id.
func findJob(jobs []apiv1.Job, nameOrID string) (apiv1.Job, bool) {
	for _, j := range jobs {
		if j.Name == nameOrID || (j.ID != "" && j.ID == nameOrID) {
			return j, true
		}
	}
	return apiv1.Job{}, false
}

// logReader reads one job's log from its cursor on.
type logReader struct {
	c      *client
	runID  string
	job    string // the name, for the prefix and messages
	key    string // the id (or name) in the URL
	step   *int
	prefix bool
	raw    bool // print control characters unescaped
	cursor string
	done   bool
}

// drain prints pages of lines until the job's log is done or a page
// neither holds lines nor moves the cursor on (the job is still running).
func (r *logReader) drain(ctx context.Context, w io.Writer) error {
	for !r.done {
		prev := r.cursor
		q := url.Values{}
		if r.step != nil {
			q.Set("step", strconv.Itoa(*r.step))
		}
		if r.cursor != "" {
			q.Set("cursor", r.cursor)
		}
		var page apiv1.LogPage
		if err := r.c.do(ctx, http.MethodGet, jobLogsPath(r.runID, r.key), q, nil, &page); err != nil {
			return fmt.Errorf("job %q: %w", r.job, err)
		}
		for _, l := range page.Lines {
			text := strings.TrimRight(l.Text, "\r\n")
			if r.prefix {
				printLine(w, r.raw, "%s | %s", r.job, text)
			} else {
				printLine(w, r.raw, "%s", text)
			}
		}
		if page.Next != "" {
			r.cursor = page.Next
		}
		r.done = page.Done
		if len(page.Lines) == 0 && r.cursor == prev {
			return nil
		}
	}
	return nil
}
