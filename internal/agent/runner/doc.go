// Package runner runs one compiled kici job on the local machine: it makes a
// fresh work directory, fetches the job's code (a tar.gz archive, a git
// repository, or a directory that is already there), runs each step's script
// in its own process group, and reports step statuses and output lines to a
// [Reporter]. It knows nothing of the orchestrator or the WebSocket: the agent
// (internal/agent) adapts a Reporter to protocol messages, and `kici run`
// uses the same runner to run a workflow locally.
//
// # Use
//
//	r, err := runner.New(logger, runner.Config{WorkDir: dir})
//	res := r.Run(ctx, spec, reporter)          // or Start, Wait, then Cleanup (removes the job dir)
//
// Cancelling ctx stops the job. The cancel cause says why, and ends up in
// the job's [Result]: [ErrCancelled] (a user cancel, reported "cancelled"),
// [ErrShutdown] (the agent is stopping, "cancelled"), or a [*TimeoutError]
// (reported "failure"). The running step's process group receives SIGTERM,
// and SIGKILL after Config.CancelGrace. A cause wrapped with [Forced] sends
// SIGKILL at once, and [Execution.Kill] ends a grace period already running
// (a forced cancel after a polite one).
//
// # Steps
//
// Steps run one after another. A step whose `if` (default "success()") is
// false is reported skipped; a step that fails without continue-on-error
// turns the job's status to "failure", so that later steps run only if
// their `if` allows it (always(), failure()). After a cancel or a job
// timeout every remaining step is skipped. docs/agent.md describes the
// environment, shells, working directories and limits a step sees.
//
// # When the runner's process dies
//
// On Linux each process the runner starts has SIGKILL as its parent-death
// signal, so a step's shell dies with the runner's process, SIGKILL
// included (see startProcess for why every start runs on one locked OS
// thread). Its children are out of reach of that signal: Config.Guard,
// when set, marks every process with its Env and hears of every process
// group, which the agent's reaper (internal/agent/reaper) uses to kill them
// once the agent is gone.
//
// # Containers
//
// A job with an image (workflow.Job.Image) runs each step in a container of
// its own, made from that image on the Docker engine (Config.DockerHost)
// and removed when the step ends: the job's directory is mounted at the
// same path, the step runs as the runner's user, its environment is built
// as for a host step minus the host's variables, and a cancel or timeout
// stops the container as it would a process group (SIGTERM to the step's
// shell, SIGKILL after CancelGrace). A job with services gets a network of
// its own with each service started on it, reachable by its name, before
// its first step; after its last one the services' logs are copied into
// the job-level output and everything is removed. An engine that does not
// answer, or an image that cannot be had, fails the job before its first
// step with an error matching [ErrInfrastructure]. Every container and
// network carries the job's labels ([LabelJobID], [LabelJobOwner],
// [LabelJobExec]), so that [Runner.RemoveLeftoverContainers] finds what a
// dead runner left. docs/workflows.md describes what a workflow sees.
//
// # Output
//
// A step's stdout and stderr are one stream, cut into lines (a line longer
// than [MaxLineBytes] is cut into pieces), masked (every secret value, mask
// and the job token become "***": also where control characters or escape
// sequences split it, and the stable part of its base64 at each byte
// offset; a value shorter than [MinMaskLen] only as a whole word) and
// counted against
// Config.MaxStepLogBytes; past it the runner reports one marker line and
// [Reporter.LogTruncated], and drops the rest while the step runs on. Output
// outside the steps (the checkout, the runner's own notes) belongs to step
// [JobLevelStep] (-1).
//
// # Artifacts and caches
//
// A job whose [JobSpec.Storage] names an orchestrator fetches the
// artifacts of the jobs it needs and restores its caches before its first
// step, and uploads its artifacts and saves its caches after its last
// (storage_job.go), with its job token, over at most 4 transfers at once
// per Runner. Bundles are tar.gz files (internal/bundle), checked against
// their SHA-256 before they are extracted, through an os.Root of their
// target. `kici run` names no orchestrator, and keeps none.
//
// # Concurrency
//
// A [Runner] is safe for concurrent use: each Start runs its own job in its
// own goroutines and directory. The calls one job makes to its Reporter
// never overlap and come in order: a step's log lines after its "running"
// status and before its final one.
package runner
