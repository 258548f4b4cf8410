package admincli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// The values of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// addOutputFlag gives cmd the -o flag, bound to p.
func addOutputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", formatTable, "output `FORMAT`: table or json")
}

// checkOutput validates the value of -o.
func checkOutput(format string) error {
	if format != formatTable && format != formatJSON {
		return usagef("-o %q: want table or json", format)
	}
	return nil
}

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// table is an aligned table: rows of cells, columns padded to the widest
// cell, no trailing blanks.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

// newTable starts a table that flush writes to w.
func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 8, 2, ' ', 0)
	return t
}

// row adds one row. Cells are escaped as log lines are (escapeControls),
// tabs too: names, errors and labels come from workflow files and agents,
// and must neither drive the operator's terminal nor break the columns.
func (t *table) row(cells ...string) {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ReplaceAll(escapeControls(c), "\t", `\t`)
	}
	fmt.Fprintln(t.tw, strings.Join(out, "\t"))
}

// flush writes the table out.
func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(t.buf.String()) {
		if _, err := io.WriteString(t.w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}

// ago is t relative to now at one unit's precision ("just now", "45s
// ago", "5m ago", "3h ago", "2d ago"); "-" for the zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// agoPtr is ago for an optional time.
func agoPtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ago(now, *t)
}

// elapsed is how long something that started at start ran: until end, or
// until now while end is nil. "-" when it has not started.
func elapsed(now time.Time, start, end *time.Time) string {
	if start == nil || start.IsZero() {
		return "-"
	}
	stop := now
	if end != nil {
		stop = *end
	}
	return duration(stop.Sub(*start))
}

// duration prints d with two units at most: "850ms", "42s", "1m5s",
// "2h3m", "3d4h".
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		d = d.Round(time.Second)
		return trimZero(fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second)), "0s")
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		return trimZero(fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute)), "0m")
	}
	d = d.Round(time.Hour)
	return trimZero(fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)), "0h")
}

func trimZero(s, zero string) string {
	if strings.HasSuffix(s, zero) && len(s) > len(zero) && s[len(s)-len(zero)-1] >= 'a' {
		return strings.TrimSuffix(s, zero)
	}
	return s
}

// dash is s, or "-" when s is empty, so table cells are never blank.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// list joins a list for a table cell, "-" when empty.
func list(items []string) string {
	return dash(strings.Join(items, ","))
}

// shortSHA is the first 12 characters of a commit id.
func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// nonNil makes a nil slice an empty one, so JSON shows [] and not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
