package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/blobs/s3store/s3fake"
	"github.com/kici-dev/kici/internal/testsvc"
)

// testS3Secret is the secret key the orchestrators get for the fake S3
// server (which checks no signature); it must never reach their output.
const testS3Secret = "e2e-s3-secret-never-logged"

// s3Env is the environment that points an orchestrator at the fake S3
// server's bucket, under prefix.
func s3Env(fake *s3fake.Server, prefix string) []string {
	return []string{
		"KICI_BLOB_STORE=s3://" + fake.Bucket + "/" + prefix,
		"KICI_S3_ENDPOINT=" + fake.URL,
		"KICI_S3_ACCESS_KEY_ID=kici-e2e",
		"KICI_S3_SECRET_ACCESS_KEY=" + testS3Secret,
	}
}

// TestArtifactsAndCachesInS3AcrossCoordinators: real orchestrator and
// agent processes, and a fake S3 server (s3fake: gofakes3 in memory, in
// the test process) standing in for an object store. Two coordinators
// share PostgreSQL and the fake bucket. The build job runs on an agent
// connected only to the first coordinator: it uploads its artifacts and
// saves a cache there. The test job, which needs build, runs on an agent
// connected only to the second: it finds build's artifacts and restores
// the cache through the second coordinator. The bundles are objects under
// the bucket's prefix and nothing is in either data dir; neither
// coordinator gives the per-node warning of the data-dir store, nor logs
// the secret key.
func TestArtifactsAndCachesInS3AcrossCoordinators(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	fake := s3fake.Start(t, "kici-e2e")
	env := append([]string{"KICI_CLUSTER_ROLE=coordinator", "KICI_INSTANCE_HEARTBEAT_MS=200"}, s3Env(fake, "ci")...)
	first := startOrchestrator(t, dbURL, env...)
	second := startOrchestrator(t, dbURL, env...)
	first.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [first]
    artifacts: {paths: ["dist/**"]}
    cache:
      - key: deps-1
        paths: [vendor]
    steps:
      - run: mkdir -p dist vendor && echo "built on the first" > dist/app.txt && echo "vendored" > vendor/lib.txt
  test:
    needs: [build]
    runs-on: [second]
    cache:
      - key: deps-1
        paths: [vendor]
    steps:
      - run: cat dist/app.txt && cat vendor/lib.txt
`})
	startAgent(t, first, "", "agent-first", []string{"first"})
	startAgent(t, second, "", "agent-second", []string{"second"})
	id := first.push(t)
	r := second.waitRun(t, id, 90*time.Second, "run to end", ended)
	build, test := first.logs(t, id, "build"), second.logs(t, id, "test")
	if r.Status != "success" {
		t.Fatalf("run: got %s (%s), want success\nbuild: %q\ntest: %q", r.Status, r.Error, build, test)
	}
	if !hasLine(build, "[kici] artifacts uploaded: 1 files") || !hasLine(build, "[kici] cache saved: deps-1") {
		t.Errorf("build log: got %q, want the upload and the cache save noted", build)
	}
	for _, want := range []string{"[kici] artifacts of build: 1 files", "[kici] cache hit: deps-1", "built on the first", "vendored"} {
		if !hasLine(test, want) {
			t.Errorf("test log: got %q, want a line with %q", test, want)
		}
	}

	for _, prefix := range []string{"ci/artifacts/", "ci/caches/"} {
		if keys := fake.Keys(t, prefix); len(keys) != 1 || !strings.HasSuffix(keys[0], ".tgz") {
			t.Errorf("objects under %s: got %q, want one bundle", prefix, keys)
		}
	}
	if all, in := fake.Keys(t, ""), fake.Keys(t, "ci/"); len(all) != len(in) {
		t.Errorf("objects in the bucket: got %q, want all under ci/", all)
	}
	for _, o := range []*orchestrator{first, second} {
		if _, err := os.Stat(filepath.Join(o.dataDir, "blobs")); !os.IsNotExist(err) {
			t.Errorf("%s: data dir blobs: got %v, want no directory", o.addr, err)
		}
		out := o.output.String()
		if strings.Contains(out, "kept in this coordinator's data dir") {
			t.Errorf("%s: warned that artifacts and caches are per node, with a shared bucket", o.addr)
		}
		if !strings.Contains(out, "blob_store=\"s3://kici-e2e/ci at "+fake.URL+"\"") {
			t.Errorf("%s: the start-up log does not name the bucket", o.addr)
		}
		if strings.Contains(out, testS3Secret) {
			t.Errorf("%s: the log shows the S3 secret key", o.addr)
		}
	}
}

// TestS3BucketNotReachableStopsTheStart: an orchestrator whose
// KICI_BLOB_STORE names a bucket the (fake) S3 server does not have exits
// at start, saying the store is not reachable and which variables to
// check, without showing the secret key.
func TestS3BucketNotReachableStopsTheStart(t *testing.T) {
	t.Parallel()
	fake := s3fake.Start(t, "kici-e2e")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kici-orchestrator"), "serve")
	cmd.Env = append(minimalEnv(), "KICI_HTTP_ADDR="+freeAddr(t), "KICI_DATA_DIR="+t.TempDir(), "KICI_LOG_FORMAT=text",
		"KICI_BLOB_STORE=s3://kici-elsewhere/ci", "KICI_S3_ENDPOINT="+fake.URL,
		"KICI_S3_ACCESS_KEY_ID=kici-e2e", "KICI_S3_SECRET_ACCESS_KEY="+testS3Secret)
	out, err := cmd.CombinedOutput()
	t.Logf("orchestrator output:\n%s", out)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("orchestrator: got %v, want it to exit with an error", err)
	}
	want := "blob store s3://kici-elsewhere/ci at " + fake.URL + " is not reachable; check KICI_BLOB_STORE"
	if !strings.Contains(string(out), want) {
		t.Errorf("output: want %q", want)
	}
	if strings.Contains(string(out), testS3Secret) {
		t.Errorf("output shows the S3 secret key")
	}
}
