package fakevm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// Handler returns the Firecracker API of m, to serve on the VMM's unix
// socket. It routes as Firecracker's parsed_request.rs does: the first path
// element picks the resource, a GET must have no body and a PUT or PATCH
// must have one, resource ids in the path must match the body's, and every
// refusal is a 400 (413 for a too large MMDS document) with a
// {"fault_message": ...} body. Successful calls answer 204, GETs 200 with
// JSON.
func (m *Machine) Handler() http.Handler {
	return http.HandlerFunc(m.serveAPI)
}

func (m *Machine) serveAPI(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(m.cfg.PayloadLimit)+1))
	if err != nil {
		writeFault(w, fault("Failed to read the request body: %v", err))
		return
	}
	if len(body) > m.cfg.PayloadLimit {
		writeFault(w, fault("Request payload with size %d is larger than the limit of %d allowed by server.", max(r.ContentLength, int64(len(body))), m.cfg.PayloadLimit))
		return
	}
	out, err := m.route(r.Context(), r.Method, r.URL.Path, body)
	if err != nil {
		var f *apiFault
		if !errors.As(err, &f) {
			f = fault("%v", err)
		}
		m.log.Warn("api request refused", "method", r.Method, "path", r.URL.Path, "status", f.status, "fault_message", f.msg)
		writeFault(w, f)
		return
	}
	m.log.Debug("api request done", "method", r.Method, "path", r.URL.Path)
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeFault(w, fault("Internal server error: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// route runs one API call and returns the body of a 200 answer (nil for
// 204).
func (m *Machine) route(ctx context.Context, method, uri string, body []byte) (any, error) {
	tokens := strings.Split(strings.TrimLeft(uri, "/"), "/")
	if n := len(tokens); n > 1 && tokens[n-1] == "" { // split_terminator drops one trailing empty token
		tokens = tokens[:n-1]
	}
	path := tokens[0]
	has := len(body) > 0
	switch method {
	case http.MethodGet:
		if has {
			return nil, fault("GET request cannot have a body.")
		}
		switch path {
		case "":
			return m.describe(), nil
		case "version":
			return map[string]string{"firecracker_version": Version}, nil
		case "machine-config":
			return m.machineConfig(), nil
		case "mmds":
			return m.getMMDS()
		case "vm":
			if t, _ := tokenAt(tokens, 1); t == "config" {
				return m.vmConfig(), nil
			}
		case "balloon", "hotplug":
			return nil, notImplemented(method, path)
		}
	case http.MethodPut:
		if !has {
			return nil, fault("Empty PUT request.")
		}
		return nil, m.routePut(ctx, path, tokens, body)
	case http.MethodPatch:
		if !has {
			return nil, fault("Empty PATCH request.")
		}
		return nil, m.routePatch(ctx, path, tokens, body)
	case http.MethodDelete:
		switch path {
		case "drives", "pmem", "network-interfaces":
			return nil, notImplemented(method, path)
		}
	}
	return nil, fault("Invalid request method and/or path: %s %s.", method, path)
}

func (m *Machine) routePut(ctx context.Context, path string, tokens []string, body []byte) error {
	switch path {
	case "actions":
		var a actionInfo
		if err := decodeBody(body, &a); err != nil {
			return err
		}
		if a.ActionType == nil {
			return deserializeFault("missing field `action_type`")
		}
		switch *a.ActionType {
		case "InstanceStart":
			return m.start(ctx)
		case "SendCtrlAltDel":
			return m.ctrlAltDel()
		case "FlushMetrics":
			return m.flushMetrics()
		}
		return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected one of `FlushMetrics`, `InstanceStart`, `SendCtrlAltDel`", *a.ActionType))
	case "boot-source":
		var bs bootSource
		if err := decodeBody(body, &bs); err != nil {
			return err
		}
		return m.putBootSource(bs)
	case "drives":
		d, err := decodeWithID(tokens, body, func(d *drive) *string { return d.DriveID }, driveIDs)
		if err != nil {
			return err
		}
		return m.putDrive(d)
	case "network-interfaces":
		n, err := decodeWithID(tokens, body, func(n *networkInterface) *string { return n.IfaceID }, ifaceIDs)
		if err != nil {
			return err
		}
		return m.putNetworkInterface(n)
	case "machine-config":
		var mc machineConfig
		if err := decodeBody(body, &mc); err != nil {
			return err
		}
		return m.putMachineConfig(mc)
	case "mmds":
		switch sub, ok := tokenAt(tokens, 1); {
		case !ok:
			doc, err := decodeAny(body)
			if err != nil {
				return err
			}
			return m.putMMDS(doc)
		case sub == "config":
			var c mmdsConfig
			if err := decodeBody(body, &c); err != nil {
				return err
			}
			return m.putMMDSConfig(c)
		default:
			return fault("Unrecognized PUT request path `%s`.", sub)
		}
	case "logger":
		var l loggerConfig
		if err := decodeBody(body, &l); err != nil {
			return err
		}
		return m.putLogger(l)
	case "metrics":
		var c metricsConfig
		if err := decodeBody(body, &c); err != nil {
			return err
		}
		return m.putMetrics(c)
	case "snapshot":
		switch sub, ok := tokenAt(tokens, 1); {
		case !ok:
			return fault("Missing snapshot operation type.")
		case sub == "create":
			var p snapshotCreateParams
			if err := decodeBody(body, &p); err != nil {
				return err
			}
			return m.createSnapshot(p)
		case sub == "load":
			var p snapshotLoadParams
			if err := decodeBody(body, &p); err != nil {
				return err
			}
			return m.loadSnapshot(ctx, p)
		default:
			return fault("Invalid request method and/or path: PUT /snapshot/%s.", sub)
		}
	case "balloon", "cpu-config", "pmem", "serial", "vsock", "entropy", "hotplug":
		return notImplemented(http.MethodPut, path)
	}
	return fault("Invalid request method and/or path: PUT %s.", path)
}

func (m *Machine) routePatch(ctx context.Context, path string, tokens []string, body []byte) error {
	switch path {
	case "drives":
		d, err := decodeWithID(tokens, body, func(d *partialDrive) *string { return d.DriveID }, driveIDs)
		if err != nil {
			return err
		}
		return m.patchDrive(d)
	case "network-interfaces":
		n, err := decodeWithID(tokens, body, func(n *partialNetworkInterface) *string { return n.IfaceID }, ifaceIDs)
		if err != nil {
			return err
		}
		return m.patchNetworkInterface(n)
	case "machine-config":
		var mc machineConfig
		if err := decodeBody(body, &mc); err != nil {
			return err
		}
		return m.patchMachineConfig(mc)
	case "mmds":
		doc, err := decodeAny(body)
		if err != nil {
			return err
		}
		return m.patchMMDS(doc)
	case "vm":
		var v vmStateBody
		if err := decodeBody(body, &v); err != nil {
			return err
		}
		if v.State == nil {
			return deserializeFault("missing field `state`")
		}
		if *v.State != "Paused" && *v.State != "Resumed" {
			return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected `Paused` or `Resumed`", *v.State))
		}
		return m.setVMState(ctx, *v.State)
	case "balloon", "pmem", "hotplug":
		return notImplemented(http.MethodPatch, path)
	}
	return fault("Invalid request method and/or path: PATCH %s.", path)
}

// tokenAt returns tokens[i] when it exists.
func tokenAt(tokens []string, i int) (string, bool) {
	if i < len(tokens) {
		return tokens[i], true
	}
	return "", false
}

// pathID returns the resource id of /<resource>/<id>, checked as
// Firecracker's checked_id does.
func pathID(tokens []string) (string, error) {
	id, ok := tokenAt(tokens, 1)
	if !ok || id == "" {
		return "", fault("The ID cannot be empty.")
	}
	for _, c := range id {
		if c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return "", fault("API Resource IDs can only contain alphanumeric characters and underscores.")
		}
	}
	return id, nil
}

// decodeBody decodes one JSON document into v, refusing unknown fields and
// trailing data as serde does.
func decodeBody(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return deserializeFault(err.Error())
	}
	if d.More() {
		return deserializeFault("trailing characters")
	}
	if _, err := d.Token(); err != io.EOF {
		return deserializeFault("trailing characters")
	}
	return nil
}

// decodeAny decodes an MMDS document (any JSON value), keeping numbers
// exact.
func decodeAny(body []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, deserializeFault(err.Error())
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, deserializeFault("trailing characters")
	}
	return v, nil
}

func notImplemented(method, path string) error {
	return fault("fake firecracker: %s /%s is not implemented by the fake.", method, path)
}

func writeFault(w http.ResponseWriter, f *apiFault) {
	b, _ := json.Marshal(map[string]string{"fault_message": f.msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	_, _ = w.Write(b)
}

// idRule says how a body's id field is named and how a mismatch with the
// request path is worded (Firecracker words the two kinds differently).
type idRule struct {
	field    string
	mismatch func(path, body string) error
}

var (
	driveIDs = idRule{field: "drive_id", mismatch: func(string, string) error {
		return fault("The id from the path does not match the id from the body!")
	}}
	ifaceIDs = idRule{field: "iface_id", mismatch: func(path, body string) error {
		return fault("The id from the path [%s] does not match the id from the body [%s]!", path, body)
	}}
)

// decodeWithID decodes the body of a request on /<kind>/{id} and checks
// that the id it holds is the path's.
func decodeWithID[T any](tokens []string, body []byte, idOf func(*T) *string, rule idRule) (T, error) {
	var v T
	id, err := pathID(tokens)
	if err != nil {
		return v, err
	}
	if err := decodeBody(body, &v); err != nil {
		return v, err
	}
	got := idOf(&v)
	if got == nil {
		return v, deserializeFault("missing field `" + rule.field + "`")
	}
	if *got != id {
		return v, rule.mismatch(id, *got)
	}
	return v, nil
}
