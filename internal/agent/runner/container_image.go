package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/kici-dev/kici/internal/workflow"
)

// ensureImage makes sure the engine has img.Image, as its pull policy
// says: "always" pulls, "if-not-present" (or "") pulls when the engine
// lacks it, "never" fails when the engine lacks it. Every failure matches
// ErrInfrastructure: another agent's engine may have the image, or reach
// its registry.
func (c *jobContainers) ensureImage(ctx context.Context, img workflow.Container) error {
	ref := img.Image
	if img.Pull != workflow.PullAlways {
		_, err := c.cli.ImageInspect(ctx, ref)
		switch {
		case err == nil:
			return nil
		case !cerrdefs.IsNotFound(err):
			return infrastructure(fmt.Errorf("inspect image %q: %w", ref, err))
		case img.Pull == workflow.PullNever:
			return infrastructure(fmt.Errorf("image %q is not on this agent's Docker engine, and its pull policy is never", ref))
		}
	}
	return infrastructure(c.pull(ctx, ref))
}

// pull pulls ref, noting its start and end in the job-level output: a
// line when it starts, the digest and status lines the engine sends, and a
// summary. Layer-by-layer progress is left out.
func (c *jobContainers) pull(ctx context.Context, ref string) error {
	c.out.note("pulling image %s", ref)
	rc, err := c.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("pull image %q: %w", ref, err)
	}
	defer rc.Close()
	layers := 0
	dec := json.NewDecoder(rc)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("pull image %q: read the engine's progress: %w", ref, err)
		}
		switch {
		case m.Error != nil:
			return fmt.Errorf("pull image %q: %s", ref, m.Error.Message)
		case m.Status == "Pull complete":
			layers++
		case strings.HasPrefix(m.Status, "Digest:"), strings.HasPrefix(m.Status, "Status:"):
			c.out.note("%s", m.Status)
		}
	}
	c.out.note("pulled image %s (%d layers downloaded)", ref, layers)
	return nil
}

// isGone reports whether an engine error says the object is already gone.
func isGone(err error) bool { return cerrdefs.IsNotFound(err) }
