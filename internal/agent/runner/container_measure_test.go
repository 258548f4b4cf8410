//go:build linux

package runner_test

import (
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

// measureImage turns on TestMeasureImageJob, a measurement for
// docs/benchmarks.md, not a check: go test ./internal/agent/runner/ -run
// TestMeasureImageJob -measure-image -v.
var measureImage = flag.Bool("measure-image", false, "measure what running a trivial job in an image (and with a service) adds to the same job on the host")

// TestMeasureImageJob runs a one-step job (`true`) 20 times each on the
// host, in an image (pull: never), and in an image with one service that
// has a HEALTHCHECK, one job at a time and the three kinds interleaved. It
// logs p50 and p90 of each kind's whole job (Runner.Run: directory,
// containers, step, teardown) and the p50 each adds to the host's. It
// asserts no time.
func TestMeasureImageJob(t *testing.T) {
	if !*measureImage {
		t.Skip("a measurement: run with -measure-image")
	}
	im := requireDocker(t)
	kinds := []struct {
		name string
		spec func() runner.JobSpec
	}{
		{"host", func() runner.JobSpec { return imageJob(t, "", workflow.Step{Run: "true"}) }},
		{"image", func() runner.JobSpec { return imageJob(t, im.plain, workflow.Step{Run: "true"}) }},
		{"image+service", func() runner.JobSpec {
			spec := imageJob(t, im.plain, workflow.Step{Run: "true"})
			spec.Job.Services = []workflow.Service{{Name: "api", Container: workflow.Container{Image: im.svc, Pull: workflow.PullNever}}}
			return spec
		}},
	}
	r := newRunner(t, nil)
	took := map[string][]time.Duration{}
	for range 20 {
		for _, k := range kinds {
			start := time.Now()
			res := r.Run(t.Context(), k.spec(), newRecorder())
			took[k.name] = append(took[k.name], time.Since(start))
			if res.Status != runner.StatusSuccess {
				t.Fatalf("%s job: %s %v", k.name, res.Status, res.Err)
			}
		}
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	host := q(took["host"], 0.5)
	for _, k := range kinds {
		p50 := q(took[k.name], 0.5)
		t.Logf("%-14s p50 %8s  p90 %8s  adds p50 %8s (%d jobs)", k.name, p50.Round(100*time.Microsecond),
			q(took[k.name], 0.9).Round(100*time.Microsecond), (p50 - host).Round(100*time.Microsecond), len(took[k.name]))
	}
}
