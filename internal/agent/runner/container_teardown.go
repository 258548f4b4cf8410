package runner

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

// Bounds of the service logs copied into the job's output.
const (
	// MaxServiceLogBytes is how much of the end of each service's log the
	// job-level output receives.
	MaxServiceLogBytes = 64 << 10
	// maxServiceLogLines is how many of its last lines the engine is asked
	// for, so that a service that wrote gigabytes is not read whole.
	maxServiceLogLines = 1000
	// serviceLogTimeout bounds the copy of one service's log.
	serviceLogTimeout = 10 * time.Second
)

// teardown ends what prepareContainers made, whatever became of the job:
// each service's log is copied into the job-level output (its last
// MaxServiceLogBytes, each line prefixed "[service NAME] " and masked like
// all output), then every container of this run of the job (services, and
// any step container whose own removal failed) is removed, and its network
// with them. It runs on a context of its own, bounded by teardownTimeout,
// so that a cancelled or timed-out job is cleaned up too. Failures are
// logged: the agent's next start removes what is left
// (Runner.RemoveLeftoverContainers). A nil c does nothing.
func (c *jobContainers) teardown(ctx context.Context) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	for _, s := range c.svcs {
		c.copyLog(ctx, s)
	}
	mine := filters.NewArgs(filters.Arg("label", LabelJobExec+"="+c.labels[LabelJobExec]))
	cs, err := c.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: mine})
	if err != nil {
		c.log.Warn("list the job's containers", "error", err)
	}
	for _, ct := range cs {
		c.remove(ctx, ct.ID)
	}
	nets, err := c.cli.NetworkList(ctx, network.ListOptions{Filters: mine})
	if err != nil {
		c.log.Warn("list the job's networks", "error", err)
	}
	for _, nw := range nets {
		if err := c.cli.NetworkRemove(ctx, nw.ID); err != nil && !isGone(err) {
			c.log.Warn("remove the job's network", "network", nw.Name, "error", err)
		}
	}
}

// copyLog reports the end of service s's log as job-level lines.
func (c *jobContainers) copyLog(ctx context.Context, s service) {
	ctx, cancel := context.WithTimeout(ctx, serviceLogTimeout)
	defer cancel()
	rc, err := c.cli.ContainerLogs(ctx, s.id, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(maxServiceLogLines),
	})
	if err != nil {
		c.out.note("service %s: its log could not be read: %v", s.name, err)
		return
	}
	defer rc.Close()
	tail := &tailBuffer{max: MaxServiceLogBytes}
	_, _ = stdcopy.StdCopy(tail, tail, rc)
	lines, cut := tail.lines()
	if len(lines) == 0 {
		return
	}
	if cut {
		c.out.note("service %s: log cut to its last %s", s.name, formatBytes(MaxServiceLogBytes))
	}
	prefix := "[service " + s.name + "] "
	for _, l := range lines {
		c.out.line([]byte(prefix + l))
	}
}

// tailBuffer keeps the last max bytes written to it (and up to as many
// again before it trims).
type tailBuffer struct {
	max int
	buf []byte
	cut bool // bytes were dropped from the front
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		b.cut = true
	}
	return len(p), nil
}

// lines returns the kept text's lines, at most max bytes of them, without
// the first line if its start was dropped, and whether anything was
// dropped.
func (b *tailBuffer) lines() ([]string, bool) {
	data, cut := b.buf, b.cut
	if len(data) > b.max {
		data, cut = data[len(data)-b.max:], true
	}
	if cut {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil, cut
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines, cut
}
