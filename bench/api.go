package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// client calls one orchestrator's HTTP API with the admin token. Its
// transport keeps connections alive, so a measured request does not pay
// for a TCP handshake. Safe for concurrent use.
type client struct {
	base  string // http://127.0.0.1:PORT
	token string
	http  *http.Client
}

func newClient(addr, token string) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &client{base: "http://" + addr, token: token, http: &http.Client{Transport: tr}}
}

// do sends in as JSON and decodes the answer into out; any status other
// than want is an error carrying the API's message.
func (c *client) do(ctx context.Context, method, path string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: got status %d, want %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode %q: %w", method, path, data, err)
		}
	}
	return nil
}

func (c *client) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (c *client) agentToken(ctx context.Context) (string, error) {
	var tok apiv1.AgentToken
	err := c.do(ctx, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{Labels: []string{}}, &tok, http.StatusCreated)
	return tok.Token, err
}

func (c *client) addSource(ctx context.Context, name, dir string) error {
	return c.do(ctx, "POST", "/api/v1/sources", apiv1.Source{Name: name, Kind: "local", Path: dir}, nil, http.StatusCreated)
}

// trigger pushes to main of source and returns the ids of the runs it
// started, want of them.
func (c *client) trigger(ctx context.Context, source string, want int) ([]string, error) {
	var tr apiv1.TriggerResponse
	if err := c.do(ctx, "POST", "/api/v1/sources/"+source+"/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, &tr, http.StatusOK); err != nil {
		return nil, err
	}
	if len(tr.Runs) != want {
		return nil, fmt.Errorf("trigger %s started %d runs, want %d: %+v", source, len(tr.Runs), want, tr.Decisions)
	}
	ids := make([]string, len(tr.Runs))
	for i, r := range tr.Runs {
		ids[i] = r.ID
	}
	return ids, nil
}

func (c *client) run(ctx context.Context, id string) (apiv1.Run, error) {
	var r apiv1.Run
	err := c.do(ctx, "GET", "/api/v1/runs/"+id, nil, &r, http.StatusOK)
	return r, err
}

func (c *client) agents(ctx context.Context) ([]apiv1.Agent, error) {
	var list apiv1.AgentList
	err := c.do(ctx, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
	return list.Agents, err
}

func (c *client) queue(ctx context.Context) ([]apiv1.QueueEntry, error) {
	var q apiv1.Queue
	err := c.do(ctx, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
	return q.Jobs, err
}

func (c *client) jobLogs(ctx context.Context, runID, job string, step int) ([]apiv1.LogLine, error) {
	var page apiv1.LogPage
	err := c.do(ctx, "GET", fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?step=%d", runID, job, step), nil, &page, http.StatusOK)
	return page.Lines, err
}

// waitAgents waits until the orchestrator lists n agents.
func (c *client) waitAgents(ctx context.Context, n int) error {
	return poll(ctx, 30*time.Second, fmt.Sprintf("%d agents connected", n), func() bool {
		list, err := c.agents(ctx)
		return err == nil && len(list) >= n
	})
}

func terminal(status string) bool {
	switch status {
	case "success", "failure", "cancelled":
		return true
	}
	return false
}

// waitRun follows the run's Server-Sent Events until one says the run
// reached a final status, and returns that status and when this process
// read it. The stream starts with the run's current status, so a run that
// ended before the request is seen at once. If the stream ends early or
// lags (the server dropped events), it falls back to polling GET
// /api/v1/runs/{id} every 2 ms and says so in fellBack.
func (c *client) waitRun(ctx context.Context, id string) (status string, at time.Time, fellBack bool, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/runs/"+id+"/events", nil)
	if err != nil {
		return "", time.Time{}, false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("follow run %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return "", time.Time{}, false, fmt.Errorf("follow run %s: status %d: %s", id, resp.StatusCode, bytes.TrimSpace(data))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apiv1.Event
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Kind == "lagged" {
			break
		}
		if ev.Kind == "run" && terminal(ev.Status) {
			return ev.Status, time.Now(), false, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return "", time.Time{}, false, err
	}
	// The stream ended without a final status, or lagged: poll.
	for {
		r, err := c.run(ctx, id)
		if err != nil {
			return "", time.Time{}, true, err
		}
		if terminal(r.Status) {
			return r.Status, time.Now(), true, nil
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, true, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitJobs follows the run's Server-Sent Events until n of its jobs have
// reached a final status, and returns when this process saw the last one.
// Jobs that ended before the stream was subscribed are read with one GET
// /api/v1/runs/{id} after the stream's first event (the server subscribes
// before it sends that event, so nothing falls between the two). A lagged
// or ended stream falls back to polling, as waitRun does. It does not wait
// for the run's own final status: see the PostgreSQL note in
// docs/benchmarks.md.
func (c *client) waitJobs(ctx context.Context, id string, n int) (at time.Time, fellBack bool, err error) {
	done := map[string]bool{}
	countRun := func() (bool, error) {
		r, err := c.run(ctx, id)
		if err != nil {
			return false, err
		}
		for _, j := range r.Jobs {
			if terminal(j.Status) {
				done[j.ID] = true
			}
		}
		return len(done) >= n, nil
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/runs/"+id+"/events", nil)
	if err != nil {
		return time.Time{}, false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("follow run %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return time.Time{}, false, fmt.Errorf("follow run %s: status %d: %s", id, resp.StatusCode, bytes.TrimSpace(data))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	first := true
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apiv1.Event
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Kind == "lagged" {
			break
		}
		if ev.Kind == "job" && terminal(ev.Status) {
			done[ev.JobID] = true
		}
		if first {
			first = false
			if ok, err := countRun(); err != nil || ok {
				return time.Now(), false, err
			}
		}
		if len(done) >= n {
			return time.Now(), false, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	for {
		ok, err := countRun()
		if err != nil || ok {
			return time.Now(), true, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, true, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// poll checks cond every 10 ms until it holds, timeout passes or ctx ends.
// It is for state held by other processes, which cannot signal this one.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
