package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/kici-dev/kici/internal/workflow"
)

// serviceCheckEvery is how often the runner looks at a service that is
// still becoming healthy.
const serviceCheckEvery = 100 * time.Millisecond

// jobContainers is what one job with `image:` or `services:` has on the
// Docker engine: the image its steps run in, its network, and its
// services. Only the job's goroutine calls its methods; the step watchers
// share its engine client, which is safe for concurrent use.
//
//	prepare ──► images present ──► network ──► services started ──► services ready ──► steps
//	   │               │                │               │                   │              │
//	   └───────────────┴── failure ─────┴───────────────┴───────────────────┘              │
//	                              │                                                        │
//	                              ▼                                                        ▼
//	                          teardown: services' logs copied, containers and network removed
type jobContainers struct {
	cli     *client.Client
	log     *slog.Logger
	out     *output           // the job-level output
	labels  map[string]string // on every container and network of the job
	name    string            // the prefix of their names: kici-<job>-<token>
	image   string            // the steps' image; "" runs the steps on the host
	user    string            // uid:gid the step containers run as (the runner's own)
	mounts  []mount.Mount     // the job's directory, and a SourceDir checkout outside it
	tmp     string            // the steps' TMPDIR
	network string            // the job's network's name; "" without services
	svcs    []service
	grace   time.Duration // Config.CancelGrace
	drain   time.Duration // Config.OutputDrain
}

// service is one started service of a job.
type service struct {
	name  string // its host name on the job's network
	image string
	id    string // its container
	ip    string // its address on the job's network, once known
	start time.Time
}

// needsContainers reports whether the job has an image or services.
func (j *jobRun) needsContainers() bool {
	return j.spec.Job.Image != nil || len(j.spec.Job.Services) > 0
}

// prepareContainers makes what the job's image and services need before
// its first step: the images present as their pull policies say, a network
// of the job's own with every service started on it and ready. It returns
// what it made even when it fails, for teardown to remove. Failures to
// reach the engine or to get an image match ErrInfrastructure.
func (j *jobRun) prepareContainers(ctx context.Context) (*jobContainers, error) {
	cli, err := j.r.engine(ctx)
	if err != nil {
		return nil, err
	}
	token := make([]byte, 6)
	_, _ = rand.Read(token)
	exec := hex.EncodeToString(token)
	c := &jobContainers{
		cli: cli,
		log: j.log,
		out: j.out,
		labels: map[string]string{
			LabelJobID:    j.spec.ID,
			LabelJobOwner: j.r.cfg.ContainerOwner,
			LabelJobExec:  exec,
		},
		name:  "kici-" + safeName(j.spec.ID) + "-" + exec,
		user:  fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		tmp:   j.dirs.tmp,
		grace: j.r.cfg.CancelGrace,
		drain: j.r.cfg.OutputDrain,
	}
	job := j.spec.Job
	if job.Image != nil {
		c.image = job.Image.Image
		c.mounts = []mount.Mount{{Type: mount.TypeBind, Source: j.dirs.root, Target: j.dirs.root}}
		if rel, err := filepath.Rel(j.dirs.root, j.src); err != nil || !filepath.IsLocal(rel) {
			c.mounts = append(c.mounts, mount.Mount{Type: mount.TypeBind, Source: j.src, Target: j.src})
		}
	}
	seen := map[workflow.Container]bool{}
	wanted := []workflow.Container{}
	if job.Image != nil {
		wanted = append(wanted, *job.Image)
	}
	for _, s := range job.Services {
		wanted = append(wanted, s.Container)
	}
	for _, img := range wanted {
		if seen[img] {
			continue
		}
		seen[img] = true
		if err := c.ensureImage(ctx, img); err != nil {
			return c, err
		}
	}
	if len(job.Services) > 0 {
		if err := c.startServices(ctx, job.Services, j.r.cfg.ServiceReadyTimeout); err != nil {
			return c, err
		}
	}
	if c.image != "" {
		c.out.note("steps run in containers of image %s as user %s", c.image, c.user)
	}
	return c, nil
}

// startServices makes the job's network and starts each service on it,
// reachable by its name, then waits until each is ready. The calls that
// make something run to their end even when the job is cancelled meanwhile
// (a call cut short may still make it, unknown to the runner); the job's
// cancel is looked at between them.
func (c *jobContainers) startServices(ctx context.Context, svcs []workflow.Service, readyWithin time.Duration) error {
	call, endCall := context.WithTimeout(context.WithoutCancel(ctx), engineCallTimeout)
	_, err := c.cli.NetworkCreate(call, c.name, network.CreateOptions{Driver: "bridge", Labels: c.labels})
	endCall()
	if err != nil {
		return fmt.Errorf("create the job's network: %w", err)
	}
	c.network = c.name
	for _, s := range svcs {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err := c.startService(ctx, s); err != nil {
			return err
		}
	}
	return c.waitReady(ctx, readyWithin)
}

// startService creates and starts one service container, to the end even
// when ctx is cancelled meanwhile (see startServices).
func (c *jobContainers) startService(ctx context.Context, s workflow.Service) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*engineCallTimeout)
	defer cancel()
	var env []string
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	cfg := &container.Config{Image: s.Image, Env: env, Hostname: s.Name, Labels: c.labels}
	host := &container.HostConfig{NetworkMode: container.NetworkMode(c.network)}
	nets := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		c.network: {Aliases: []string{s.Name}},
	}}
	created, err := c.cli.ContainerCreate(ctx, cfg, host, nets, nil, c.name+"-svc-"+s.Name)
	if err != nil {
		return fmt.Errorf("create service %q: %w", s.Name, err)
	}
	c.svcs = append(c.svcs, service{name: s.Name, image: s.Image, id: created.ID})
	if err := c.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start service %q: %w", s.Name, err)
	}
	c.svcs[len(c.svcs)-1].start = time.Now()
	return nil
}

// waitReady waits until every service runs, and those whose image declares
// a HEALTHCHECK report healthy, all within one deadline. A service that
// exits or turns unhealthy fails the wait at once.
func (c *jobContainers) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(serviceCheckEvery)
	defer tick.Stop()
	for i := range c.svcs {
		s := &c.svcs[i]
		for {
			info, err := c.cli.ContainerInspect(ctx, s.id)
			if err != nil {
				return fmt.Errorf("inspect service %q: %w", s.name, err)
			}
			if info.NetworkSettings != nil && info.NetworkSettings.Networks[c.network] != nil {
				s.ip = info.NetworkSettings.Networks[c.network].IPAddress
			}
			st := info.State
			if st == nil || !st.Running {
				code := 0
				if st != nil {
					code = st.ExitCode
				}
				return fmt.Errorf("service %q (%s) exited with code %d before the steps started; its log follows", s.name, s.image, code)
			}
			h := st.Health
			if h == nil {
				c.out.note("service %s (%s) started at %s", s.name, s.image, s.ip)
				break
			}
			if h.Status == container.Healthy {
				c.out.note("service %s (%s) healthy at %s after %s", s.name, s.image, s.ip, time.Since(s.start).Round(10*time.Millisecond))
				break
			}
			if h.Status == container.Unhealthy {
				return fmt.Errorf("service %q (%s) is unhealthy%s", s.name, s.image, lastCheck(h))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("service %q (%s) not healthy within %s%s", s.name, s.image, within, lastCheck(h))
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-tick.C:
			}
		}
	}
	return nil
}

// lastCheck describes a service's last health check, for an error.
func lastCheck(h *container.Health) string {
	if h == nil || len(h.Log) == 0 {
		return ""
	}
	last := h.Log[len(h.Log)-1]
	out := strings.Join(strings.Fields(last.Output), " ")
	if len(out) > 200 {
		out = out[:runeCut([]byte(out), 200)] + "…"
	}
	return fmt.Sprintf(" (last health check exited %d: %q)", last.ExitCode, out)
}

// stepEnv returns the variables the containers add to every step's
// environment: each service's address as KICI_SERVICE_<NAME>_HOST (its
// name for steps in the image, its IP address for steps on the host),
// and, in the image, HOME in the steps' TMPDIR when the steps do not run
// as root (the image's HOME belongs to its own user).
func (c *jobContainers) stepEnv() map[string]string {
	env := map[string]string{}
	if c == nil {
		return env
	}
	for _, s := range c.svcs {
		key := "KICI_SERVICE_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_")) + "_HOST"
		env[key] = s.ip
		if c.image != "" {
			env[key] = s.name
		}
	}
	if c.image != "" && os.Getuid() != 0 {
		env["HOME"] = c.tmp
	}
	return env
}

// inImage reports whether the steps run in containers; false for a nil c.
func (c *jobContainers) inImage() bool { return c != nil && c.image != "" }
