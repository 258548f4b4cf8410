package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"

	"github.com/kici-dev/kici/internal/scaler"
)

// pullPolicy says when Spawn pulls a label set's image.
type pullPolicy string

// Pull policies, as a label set spells them.
const (
	pullAlways       pullPolicy = "Always"       // pull before every spawn
	pullIfNotPresent pullPolicy = "IfNotPresent" // pull when the engine lacks the image (the default)
	pullNever        pullPolicy = "Never"        // never pull; a missing image refuses the spawn
)

// parsePullPolicy reads a label set's pull policy; empty means
// IfNotPresent.
func parsePullPolicy(s string) (pullPolicy, error) {
	switch p := pullPolicy(s); p {
	case "":
		return pullIfNotPresent, nil
	case pullAlways, pullIfNotPresent, pullNever:
		return p, nil
	}
	return "", fmt.Errorf("pull policy %q is not Always, IfNotPresent or Never", s)
}

// ensureImage makes sure the engine has image, as policy says.
func (b *Backend) ensureImage(ctx context.Context, a *agent, ref string, policy pullPolicy) error {
	if policy == pullAlways {
		return b.pull(ctx, a, ref, false)
	}
	_, err := b.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return nil
	case !cerrdefs.IsNotFound(err):
		return fmt.Errorf("inspect image %q: %w", ref, err)
	case policy == pullNever:
		return scaler.Refused("image %q is not present and its pull policy is Never", ref)
	}
	return b.pull(ctx, a, ref, true)
}

// pull pulls ref, reporting progress as EventProvisioning. missing says
// the engine does not have the image.
func (b *Backend) pull(ctx context.Context, a *agent, ref string, missing bool) error {
	b.emit(a, scaler.EventProvisioning, "pulling image "+ref)
	rc, err := b.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		err = b.readPullProgress(a, ref, rc)
		_ = rc.Close()
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("pull image %q: %w", ref, err)
	if ctx.Err() == nil && pullRefused(missing, err) {
		return &scaler.DeterministicSpawnError{Err: err}
	}
	return err
}

// pullRefused classifies a failed pull: true means retrying at once would
// fail the same way. An image the engine lacks and cannot pull is
// refused; so is any pull the registry answered with "no such image",
// "unauthorized", "forbidden" or "invalid reference". Other failures (a
// registry that cannot be reached, a cancelled ctx) may pass.
func pullRefused(missing bool, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return missing || cerrdefs.IsNotFound(err) || cerrdefs.IsUnauthorized(err) ||
		cerrdefs.IsPermissionDenied(err) || cerrdefs.IsInvalidArgument(err)
}

// pullMessage is one line of the engine's pull progress stream.
type pullMessage struct {
	Status      string `json:"status"`
	ID          string `json:"id"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readPullProgress reads the pull stream to its end. It reports the
// overall status lines and each layer's completion (not every progress
// tick), and returns the error the stream ends with, if any.
func (b *Backend) readPullProgress(a *agent, ref string, r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read pull progress: %w", err)
		}
		switch {
		case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
			return errors.New(m.ErrorDetail.Message)
		case m.Error != "":
			return errors.New(m.Error)
		case m.ID == "" && m.Status != "":
			b.emit(a, scaler.EventProvisioning, "pull "+ref+": "+m.Status)
		case strings.HasPrefix(m.Status, "Pull complete"), strings.HasPrefix(m.Status, "Already exists"):
			b.emit(a, scaler.EventProvisioning, "pull "+ref+": layer "+m.ID+": "+m.Status)
		}
	}
}

// ImagePresent reports whether the engine has ref locally.
func (b *Backend) ImagePresent(ctx context.Context, ref string) (bool, error) {
	_, err := b.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspect image %q: %w", ref, err)
}
