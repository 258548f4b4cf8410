package admincli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// sseEvent is one Server-Sent Event: its name (the "event:" field, empty
// when absent) and its data lines joined with "\n".
type sseEvent struct {
	name string
	data []byte
}

// readSSE reads a text/event-stream from r and calls fn for each complete
// event, in order. It returns nil when r ends (an event cut off by the end
// is dropped, as the SSE specification says), the read error otherwise,
// or the first error fn returns. Comments (": keep-alive") and the id and
// retry fields are ignored.
func readSSE(r io.Reader, fn func(sseEvent) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		name    string
		data    bytes.Buffer
		hasData bool
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				if err := fn(sseEvent{name: name, data: bytes.Clone(data.Bytes())}); err != nil {
					return err
				}
			}
			name, hasData = "", false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
}
