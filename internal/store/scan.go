package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// This file converts between Go values and column values the same way on
// both engines: absent strings and times are NULL, JSON columns hold text
// (SQLite TEXT, PostgreSQL JSONB), timestamps are UTC with microsecond
// precision (what PostgreSQL keeps), so a value reads back equal to what was
// written.

// sqliteTimeLayouts start with the layout modernc.org/sqlite writes with
// _time_format=sqlite. Parsing also accepts what other tools may write.
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05",
}

// normTime returns t in UTC, truncated to microseconds, without a monotonic
// clock reading.
func normTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// timeArg is the argument for a NOT NULL timestamp column.
func timeArg(t time.Time) any { return normTime(t) }

// nullTimeArg is the argument for a nullable timestamp column: nil is NULL.
func nullTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return normTime(*t)
}

// nullStringArg is the argument for a nullable text column: "" is NULL.
func nullStringArg(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullPtrArg is the argument for an optional update: nil leaves the column
// unchanged when used as COALESCE(?, column).
func nullPtrArg[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// jsonArg marshals v for a JSON column.
func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T as json: %w", v, err)
	}
	return string(b), nil
}

// stringsArg marshals a list of strings, never as null.
func stringsArg(v []string) string {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v) // a []string always marshals
	return string(b)
}

// timeCol scans a NOT NULL timestamp.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(src any) error {
	t, ok, err := parseTimeValue(src)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("scan timestamp: got NULL, want a value")
	}
	*c.dst = t
	return nil
}

// nullTimeCol scans a nullable timestamp; NULL leaves *dst nil.
type nullTimeCol struct{ dst **time.Time }

func (c nullTimeCol) Scan(src any) error {
	t, ok, err := parseTimeValue(src)
	if err != nil {
		return err
	}
	if !ok {
		*c.dst = nil
		return nil
	}
	*c.dst = &t
	return nil
}

func parseTimeValue(src any) (time.Time, bool, error) {
	switch v := src.(type) {
	case nil:
		return time.Time{}, false, nil
	case time.Time:
		return normTime(v), true, nil
	case string:
		return parseTimeText(v)
	case []byte:
		return parseTimeText(string(v))
	default:
		return time.Time{}, false, fmt.Errorf("scan timestamp: unsupported value of type %T", src)
	}
}

func parseTimeText(s string) (time.Time, bool, error) {
	for _, layout := range sqliteTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return normTime(t), true, nil
		}
	}
	return time.Time{}, false, fmt.Errorf("scan timestamp: cannot parse %q", s)
}

// stringCol scans a nullable text column; NULL becomes "".
type stringCol struct{ dst *string }

func (c stringCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = ""
	case string:
		*c.dst = v
	case []byte:
		*c.dst = string(v)
	default:
		return fmt.Errorf("scan text: unsupported value of type %T", src)
	}
	return nil
}

// jsonCol scans a JSON column into *dst.
type jsonCol[T any] struct{ dst *T }

func (c jsonCol[T]) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		var zero T
		*c.dst = zero
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("scan json: unsupported value of type %T", src)
	}
	if err := json.Unmarshal(b, c.dst); err != nil {
		return fmt.Errorf("decode json into %T: %w", *c.dst, err)
	}
	return nil
}

// rawJSONCol scans a JSON column as raw bytes (copied).
type rawJSONCol struct{ dst *json.RawMessage }

func (c rawJSONCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = nil
	case string:
		*c.dst = json.RawMessage(v)
	case []byte:
		*c.dst = append(json.RawMessage(nil), v...)
	default:
		return fmt.Errorf("scan json: unsupported value of type %T", src)
	}
	return nil
}

// nullIntCol scans a nullable integer; NULL leaves *dst nil.
type nullIntCol struct{ dst **int }

func (c nullIntCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = nil
	case int64:
		n := int(v)
		*c.dst = &n
	case int32:
		n := int(v)
		*c.dst = &n
	default:
		return fmt.Errorf("scan integer: unsupported value of type %T", src)
	}
	return nil
}

// boolIntCol scans an INTEGER 0/1 column into *dst.
type boolIntCol struct{ dst *bool }

func (c boolIntCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = false
	case int64:
		*c.dst = v != 0
	case int32:
		*c.dst = v != 0
	case bool:
		*c.dst = v
	default:
		return fmt.Errorf("scan integer flag: unsupported value of type %T", src)
	}
	return nil
}

// boolInt is the INTEGER 0/1 a boolIntCol reads back.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
