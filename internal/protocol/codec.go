package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Decoding and encoding errors. Decode and Encode wrap exactly one of them,
// so a receiver picks its close code with errors.Is (see [DecodeCloseCode]).
var (
	// ErrTooLarge means a message exceeds [MaxMessageBytes].
	ErrTooLarge = errors.New("message too large")
	// ErrMalformed means the bytes are not a JSON object of the expected
	// shape: bad JSON, no "type", or a field of the wrong JSON type.
	ErrMalformed = errors.New("malformed message")
	// ErrVersion means the envelope's "v" is missing or is not [Version].
	ErrVersion = errors.New("protocol version mismatch")
	// ErrUnknownType means the envelope's "type" names no message type of
	// this [Version].
	ErrUnknownType = errors.New("unknown message type")
	// ErrInvalid means a message decoded but broke its Validate rules, for
	// example a missing required field.
	ErrInvalid = errors.New("invalid message")
)

// maxQuoted bounds how much of a peer-supplied value an error repeats.
const maxQuoted = 64

// envelope is the part of every message that selects its struct.
type envelope struct {
	V    *int   `json:"v"`
	Type string `json:"type"`
}

// Decode parses one message as received in a WebSocket text frame. It checks,
// in this order, the size ([ErrTooLarge]), that data is a JSON object with a
// "type" ([ErrMalformed]), the version ([ErrVersion]), that the type is known
// ([ErrUnknownType]), that the fields have the right JSON types
// ([ErrMalformed]) and the message's own rules ([ErrInvalid]). Unknown keys
// are ignored (see the package doc). The result is a pointer to one of this
// package's message structs.
func Decode(data []byte) (Message, error) {
	if len(data) > MaxMessageBytes {
		return nil, fmt.Errorf("decode: %w: %d bytes, limit %d", ErrTooLarge, len(data), MaxMessageBytes)
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("decode: %w: %w", ErrMalformed, err)
	}
	switch {
	case env.V == nil:
		return nil, fmt.Errorf(`decode: %w: missing "v", want %d`, ErrVersion, Version)
	case *env.V != Version:
		return nil, fmt.Errorf("decode: %w: got %d, want %d", ErrVersion, *env.V, Version)
	case env.Type == "":
		return nil, fmt.Errorf(`decode: %w: missing "type"`, ErrMalformed)
	}
	mt, ok := registry[env.Type]
	if !ok {
		return nil, fmt.Errorf("decode: %w %q", ErrUnknownType, clip(env.Type))
	}
	msg, err := mt.decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode: %w: %s: %w", ErrMalformed, env.Type, err)
	}
	if err := msg.Validate(); err != nil {
		return nil, fmt.Errorf("decode: %w: %w", ErrInvalid, err)
	}
	return msg, nil
}

// decodeAs unmarshals data into a new T; the envelope keys "v" and "type"
// are ignored like any other key T does not have.
func decodeAs[T any, PT interface {
	*T
	Message
}](data []byte) (Message, error) {
	msg := PT(new(T))
	if err := json.Unmarshal(data, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// Encode validates msg and returns its envelope: one JSON object with "v" and
// "type" first, then the message's fields. It refuses an invalid message
// ([ErrInvalid]) and one larger than [MaxMessageBytes] ([ErrTooLarge]), so
// that what one side sends the other side accepts. HTML characters (<, >, &)
// are written as themselves, not escaped.
func Encode(msg Message) ([]byte, error) {
	if msg == nil || isNilPointer(msg) {
		return nil, errors.New("encode: nil message")
	}
	typ := msg.Type()
	if err := msg.Validate(); err != nil {
		return nil, fmt.Errorf("encode: %w: %w", ErrInvalid, err)
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return nil, fmt.Errorf("encode %q: %w", typ, err)
	}
	fields := bytes.TrimSpace(body.Bytes())
	// fields is a JSON object; splice the envelope keys in after its "{".
	out := make([]byte, 0, len(fields)+len(typ)+24)
	out = fmt.Appendf(out, `{"v":%d,"type":%q`, Version, typ)
	if len(fields) > 2 {
		out = append(out, ',')
	}
	out = append(out, fields[1:]...)
	if len(out) > MaxMessageBytes {
		return nil, fmt.Errorf("encode %q: %w: %d bytes, limit %d", typ, ErrTooLarge, len(out), MaxMessageBytes)
	}
	return out, nil
}

func isNilPointer(msg Message) bool {
	v := reflect.ValueOf(msg)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// clip shortens a peer-supplied string before an error repeats it.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "..."
}
