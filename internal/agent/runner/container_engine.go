package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Labels on every container and network the runner makes for a job.
const (
	// LabelJobID holds the job's id (JobSpec.ID), for people and tools
	// looking at the engine.
	LabelJobID = "kici-job-id"
	// LabelJobOwner holds Config.ContainerOwner: what
	// [Runner.RemoveLeftoverContainers] looks for.
	LabelJobOwner = "kici-job-owner"
	// LabelJobExec holds a random token unique to one run of a job, so that
	// a job's teardown removes exactly its own containers, also when the
	// same job id runs again on the same engine meanwhile.
	LabelJobExec = "kici-job-exec"
)

// Bounds of the calls to the engine that the job's context does not bound.
const (
	// pingTimeout bounds the first contact with the engine of a job.
	pingTimeout = 10 * time.Second
	// engineCallTimeout bounds one call made while stopping or removing
	// (a kill, a remove): the engine may be slow, never forever.
	engineCallTimeout = 30 * time.Second
	// teardownTimeout bounds a job's whole teardown: the services' logs
	// copied, its containers and network removed.
	teardownTimeout = 60 * time.Second
)

// docker is a Runner's connection to the Docker engine, made when the
// first job that needs it starts and kept for the next ones. It is safe for
// concurrent use.
type docker struct {
	mu  sync.Mutex
	cli *client.Client
}

// engine returns the client of the engine at Config.DockerHost (or
// DOCKER_HOST, or the default socket), once the engine answered a ping.
// An engine that does not answer is an infrastructure failure whose message
// names the address tried.
func (r *Runner) engine(ctx context.Context) (*client.Client, error) {
	r.docker.mu.Lock()
	cli := r.docker.cli
	if cli == nil {
		opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
		if r.cfg.DockerHost != "" {
			opts = append(opts, client.WithHost(r.cfg.DockerHost))
		}
		var err error
		cli, err = client.NewClientWithOpts(opts...)
		if err != nil {
			r.docker.mu.Unlock()
			return nil, infrastructure(fmt.Errorf("docker client (check DOCKER_HOST): %w", err))
		}
		r.docker.cli = cli
	}
	r.docker.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, infrastructure(fmt.Errorf("no Docker engine answers at %s (start dockerd, or point DOCKER_HOST at one): %w", cli.DaemonHost(), err))
	}
	return cli, nil
}

// RemoveLeftoverContainers force-removes every container and network
// labelled with this runner's Config.ContainerOwner, and returns how many
// containers it removed. Call it before the runner's first job, when no job
// of this owner can be running: it is for what a job left because the
// process running it died (an agent killed with SIGKILL, a crash), which
// its own teardown would otherwise have removed. It does nothing when
// ContainerOwner is "", and nothing when no Docker engine is reachable (an
// agent without Docker made no containers).
func (r *Runner) RemoveLeftoverContainers(ctx context.Context) (int, error) {
	if r.cfg.ContainerOwner == "" {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	cli, err := r.engine(ctx)
	if err != nil {
		return 0, nil
	}
	own := filters.NewArgs(filters.Arg("label", LabelJobOwner+"="+r.cfg.ContainerOwner))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: own})
	if err != nil {
		return 0, fmt.Errorf("list leftover job containers: %w", err)
	}
	n := 0
	for _, c := range cs {
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
			return n, fmt.Errorf("remove leftover job container %q: %w", c.ID, err)
		}
		n++
	}
	nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: own})
	if err != nil {
		return n, fmt.Errorf("list leftover job networks: %w", err)
	}
	for _, nw := range nets {
		if err := cli.NetworkRemove(ctx, nw.ID); err != nil && !isGone(err) {
			return n, fmt.Errorf("remove leftover job network %q: %w", nw.Name, err)
		}
	}
	return n, nil
}
