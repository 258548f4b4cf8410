package protocol

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// check collects the first rule a message breaks, for its Validate method.
// Every problem is reported as "<type>: <problem naming the field>".
type check struct {
	typ string
	err error
}

func (c *check) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s", c.typ, fmt.Sprintf(format, args...))
	}
}

// required fails when value is empty.
func (c *check) required(field, value string) {
	if value == "" {
		c.failf("missing %q", field)
	}
}

// seq fails when a job-scoped sequence number is 0; numbering starts at 1.
func (c *check) seq(field string, v uint64) {
	if v == 0 {
		c.failf("%q is 0, want >= 1", field)
	}
}

// atLeast fails when v < limit.
func (c *check) atLeast(field string, v, limit int64) {
	if v < limit {
		c.failf("%q is %d, want >= %d", field, v, limit)
	}
}

// oneOf fails when value is empty or not one of allowed.
func (c *check) oneOf(field, value string, allowed ...string) {
	switch {
	case value == "":
		c.failf("missing %q", field)
	case !slices.Contains(allowed, value):
		c.failf("%q is %q, want one of %s", field, clip(value), strings.Join(allowed, ", "))
	}
}

// nonEmptyItems fails on the first empty string of list.
func (c *check) nonEmptyItems(field string, list []string) {
	for i, s := range list {
		if s == "" {
			c.failf("%q is empty", fmt.Sprintf("%s[%d]", field, i))
			return
		}
	}
}

// unique fails on the first string that appears twice in list.
func (c *check) unique(field string, list []string) {
	seen := make(map[string]bool, len(list))
	for i, s := range list {
		if seen[s] {
			c.failf("%q repeats %q", fmt.Sprintf("%s[%d]", field, i), clip(s))
			return
		}
		seen[s] = true
	}
}

// notBefore fails when both times are set and end is before start.
func (c *check) notBefore(endField string, end time.Time, startField string, start time.Time) {
	if !end.IsZero() && !start.IsZero() && end.Before(start) {
		c.failf("%q is before %q", endField, startField)
	}
}

// item names element i of a list field, e.g. in_flight[2].job_id.
func item(field string, i int, sub string) string {
	return fmt.Sprintf("%s[%d].%s", field, i, sub)
}
