package deploy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// This test drives the Docker Engine through its Go client (already a
// dependency, used by the container scaler) rather than the docker CLI: it
// needs only the engine's socket, every call takes a context with a
// deadline, and inspect results come typed (published port, user, state)
// instead of as text to parse. The build context is made in memory from
// deploy/Dockerfile and freshly built binaries, so the test writes nothing
// into the repository's bin/.

// The image's contract, as deploy/Dockerfile and docs/deploy.md state it.
const (
	imageUser    = "65532:65532"
	imageUID     = "65532"
	imagePort    = "4000/tcp"
	hostCABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// binaries are the programs `make build` puts into bin/, which the
// Dockerfile copies.
var binaries = []string{"kici-orchestrator", "kici-agent", "kici-admin", "kici"}

// Bounds of the test's waits.
const (
	goBuildTimeout = 10 * time.Minute // four static binaries, cold cache, 2 cores
	buildTimeout   = 5 * time.Minute  // the image (copying ~100 MB of binaries)
	readyTimeout   = 90 * time.Second // the container's /readyz answering 200
	stopTimeout    = 30 * time.Second // docker stop's grace before SIGKILL
	callTimeout    = 30 * time.Second // any other engine call
)

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries and a container image: not in -short mode")
	}
	t.Parallel()
	cli := dockerEngine(t)
	ca := readCABundle(t)
	bin := buildBinaries(t)
	tag := buildImage(t, cli, bin, ca)
	checkImageConfig(t, cli, tag)

	token := randomHex(t, 16)
	id := createContainer(t, cli, tag, token)
	startContainer(t, cli, id)
	base := publishedURL(t, cli, id)
	waitReady(t, cli, id, base)
	checkAPI(t, base, token)
	checkNonRoot(t, cli, id)
	checkCleanStop(t, cli, id)

	logs := containerLogs(t, cli, id)
	if !strings.Contains(logs, "orchestrator listening") {
		t.Errorf("container log: got no \"orchestrator listening\" line, want one:\n%s", logs)
	}
	if strings.Contains(logs, "unknown variable") {
		t.Errorf("container log: got an unknown variable warning, want none:\n%s", logs)
	}
}

// dockerEngine returns a client of the engine (DOCKER_HOST, else the
// default socket), closed when the test ends. Without a reachable engine
// the test is skipped, or fails under KICI_TEST_REQUIRE_SERVICES=1.
func dockerEngine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		if err != nil {
			_ = cli.Close()
		}
	}
	if err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("no Docker engine reachable (%v), and %s=1 requires one", err, testsvc.EnvRequireServices)
		}
		t.Skipf("no Docker engine reachable (%v): skipping the image test (start dockerd, or set %s=1 to fail instead)", err, testsvc.EnvRequireServices)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// readCABundle returns the build host's CA bundle, which the documented
// build copies into the context. Without one the test is skipped, or fails
// under KICI_TEST_REQUIRE_SERVICES=1.
func readCABundle(t *testing.T) []byte {
	t.Helper()
	ca, err := os.ReadFile(hostCABundle)
	if err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("read the host's CA bundle (%v), and %s=1 requires it (install ca-certificates)", err, testsvc.EnvRequireServices)
		}
		t.Skipf("read the host's CA bundle (%v): skipping the image test (install ca-certificates, or set %s=1 to fail instead)", err, testsvc.EnvRequireServices)
	}
	return ca
}

// buildBinaries builds the four binaries as `make build` does (static,
// CGO_ENABLED=0, -trimpath) into a temporary directory and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("find the go command: %v", err)
	}
	dir := t.TempDir()
	args := []string{"build", "-trimpath", "-o", dir + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	ctx, cancel := context.WithTimeout(t.Context(), goBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = ".." // the module root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built %v in %s", binaries, time.Since(start).Round(time.Millisecond))
	return dir
}

// intermediateImage matches the legacy builder's report of the image a
// step made (" ---> 0123456789ab").
var intermediateImage = regexp.MustCompile(`(?m)^ ---> ([0-9a-f]{12,64})\s*$`)

// buildImage builds deploy/Dockerfile with the legacy builder from a
// context laid out as the documented one (bin/ after `make build` plus the
// CA bundle) and returns its tag. The image, and the images of the build's
// steps (the skeleton stage's are not parents of the final image), are
// removed when the test ends, whether or not the build succeeded.
func buildImage(t *testing.T, cli *client.Client, bin string, ca []byte) string {
	t.Helper()
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	tag := "kici-deploy-test:" + randomHex(t, 6)
	var output strings.Builder // the builder's stream, for errors and cleanup
	t.Cleanup(func() {
		// The tag first, then the step images newest first: a child goes
		// before its parent, and removing an image prunes its untagged
		// parents, so most of them are gone by their turn.
		refs := []string{tag}
		steps := intermediateImage.FindAllStringSubmatch(output.String(), -1)
		for _, m := range slices.Backward(steps) {
			refs = append(refs, m[1])
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		removed := 0
		for _, ref := range refs {
			deleted, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
			for _, d := range deleted {
				if d.Deleted != "" {
					removed++
				}
			}
			switch {
			case err == nil, cerrdefs.IsNotFound(err):
			case cerrdefs.IsConflict(err):
				// Another build took this step image as its cache
				// (NoCache keeps this build from doing the same): it
				// is that image's parent now, and not ours to remove.
				t.Logf("leave image %s: %v", ref, err)
			default:
				t.Errorf("remove image %s: %v", ref, err)
			}
		}
		t.Logf("removed image %s and its build's step images (%d ids deleted)", tag, removed)
	})

	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(writeContext(pw, dockerfile, bin, ca)) })
	defer wg.Wait()
	defer pr.Close() // unblocks the writer if the engine stops reading

	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	start := time.Now()
	resp, err := cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		NoCache:     true, // every step image is this build's own, so removing them touches nothing else
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		t.Fatalf("build the image: %v", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var buildErr string
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("read the image build's output: %v", err)
		}
		output.WriteString(m.Stream)
		if m.Error != "" {
			buildErr = m.Error
		}
	}
	if buildErr != "" {
		t.Fatalf("build the image: %s\n%s", buildErr, output.String())
	}
	t.Logf("built image %s in %s", tag, time.Since(start).Round(time.Millisecond))
	return tag
}

// writeContext writes the build context as a tar stream: the Dockerfile,
// the binaries and the CA bundle, as `docker build -f deploy/Dockerfile bin`
// sees them once the bundle is copied into bin/.
func writeContext(w io.Writer, dockerfile []byte, bin string, ca []byte) error {
	tw := tar.NewWriter(w)
	add := func(name string, mode int64, size int64, body io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return err
		}
		_, err := io.Copy(tw, body)
		return err
	}
	if err := add("Dockerfile", 0o644, int64(len(dockerfile)), bytes.NewReader(dockerfile)); err != nil {
		return err
	}
	if err := add("ca-certificates.crt", 0o644, int64(len(ca)), bytes.NewReader(ca)); err != nil {
		return err
	}
	for _, b := range binaries {
		f, err := os.Open(filepath.Join(bin, b))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = add(b, 0o755, fi.Size(), f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("add %s to the build context: %w", b, err)
		}
	}
	return tw.Close()
}

// checkImageConfig compares the image's configuration with what the
// Dockerfile promises.
func checkImageConfig(t *testing.T, cli *client.Client, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	insp, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("inspect image %s: %v", tag, err)
	}
	if insp.Config == nil {
		t.Fatalf("inspect image %s: no config", tag)
	}
	type config struct {
		User, WorkingDir string
		Entrypoint, Cmd  []string
		DataDir          bool // KICI_DATA_DIR=/data in Env
		Volumes, Exposed []string
	}
	keys := func(m map[string]struct{}) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	got := config{
		User:       insp.Config.User,
		WorkingDir: insp.Config.WorkingDir,
		Entrypoint: insp.Config.Entrypoint,
		Cmd:        insp.Config.Cmd,
		DataDir:    slices.Contains(insp.Config.Env, "KICI_DATA_DIR=/data"),
		Volumes:    keys(insp.Config.Volumes),
		Exposed:    keys(insp.Config.ExposedPorts),
	}
	want := config{
		User:       imageUser,
		WorkingDir: "/data",
		Entrypoint: []string{"/usr/local/bin/kici-orchestrator"},
		Cmd:        []string{"serve"},
		DataDir:    true,
		Volumes:    []string{"/data"},
		Exposed:    []string{imagePort},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image config (-want +got):\n%s", diff)
	}
}

// createContainer creates a container of the image with the bootstrap
// token set and the API published on a random loopback port. The container
// and its anonymous /data volume are removed when the test ends; if the
// test failed, its log is shown first.
func createContainer(t *testing.T, cli *client.Client, tag, token string) string {
	t.Helper()
	// PortBindings' type lives in github.com/docker/go-connections, which
	// go.mod lists as indirect; the API's JSON spares the test that import.
	var hc container.HostConfig
	bindings := `{"PortBindings": {"` + imagePort + `": [{"HostIp": "127.0.0.1", "HostPort": ""}]}}`
	if err := json.Unmarshal([]byte(bindings), &hc); err != nil {
		t.Fatalf("decode port bindings: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image: tag,
		Env:   []string{"KICI_BOOTSTRAP_ADMIN_TOKEN=" + token},
	}, &hc, nil, nil, "kici-deploy-test-"+randomHex(t, 6))
	if err != nil {
		t.Fatalf("create a container of %s: %v", tag, err)
	}
	id := resp.ID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", id, err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container log:\n%s", containerLogs(t, cli, id))
		}
	})
	return id
}

func startContainer(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", id, err)
	}
}

// publishedURL returns the base URL of the container's API on the host.
func publishedURL(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	insp, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect container %s: %v", id, err)
	}
	if insp.State == nil || !insp.State.Running {
		t.Fatalf("container %s is not running: %+v", id, insp.State)
	}
	if insp.NetworkSettings == nil || len(insp.NetworkSettings.Ports[imagePort]) == 0 {
		t.Fatalf("container %s: port %s is not published", id, imagePort)
	}
	b := insp.NetworkSettings.Ports[imagePort][0]
	if b.HostIP != "127.0.0.1" || b.HostPort == "" {
		t.Fatalf("container %s: port %s published on %s:%s, want 127.0.0.1 and a port", id, imagePort, b.HostIP, b.HostPort)
	}
	return "http://127.0.0.1:" + b.HostPort
}

// waitReady polls /readyz until it answers 200, failing at once if the
// container stops (with its exit code) and after readyTimeout.
func waitReady(t *testing.T, cli *client.Client, id, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var last string
	for {
		insp, err := cli.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatalf("inspect container %s: %v (last /readyz: %s)", id, err, last)
		}
		if insp.State == nil || !insp.State.Running {
			t.Fatalf("container %s is not running: %+v", id, insp.State)
		}
		code, _, err := get(ctx, base+"/readyz", "")
		if err == nil && code == http.StatusOK {
			t.Logf("/readyz answered 200 after %s", time.Since(start).Round(time.Millisecond))
			return
		}
		last = fmt.Sprintf("status %d, error %v", code, err)
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz did not answer 200 within %s (last: %s)", readyTimeout, last)
		case <-tick.C:
		}
	}
}

// checkAPI checks the public health routes and that the API takes the
// bootstrap token and refuses a request without a valid one.
func checkAPI(t *testing.T, base, token string) {
	t.Helper()
	tests := []struct {
		name  string
		path  string
		token string
		want  int
	}{
		{name: "healthz", path: "/healthz", want: http.StatusOK},
		{name: "readyz", path: "/readyz", want: http.StatusOK},
		{name: "runs with the bootstrap token", path: "/api/v1/runs", token: token, want: http.StatusOK},
		{name: "runs without a token", path: "/api/v1/runs", want: http.StatusUnauthorized},
		{name: "runs with a wrong token", path: "/api/v1/runs", token: "not-" + token, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		code, body, err := get(ctx, base+tt.path, tt.token)
		cancel()
		if err != nil {
			t.Errorf("%s: GET %s: %v", tt.name, tt.path, err)
			continue
		}
		if code != tt.want {
			t.Errorf("%s: GET %s: got %d, want %d (body %s)", tt.name, tt.path, code, tt.want, body)
			continue
		}
		if tt.path == "/api/v1/runs" && code == http.StatusOK {
			var runs apiv1.RunList
			if err := json.Unmarshal(body, &runs); err != nil {
				t.Errorf("%s: decode %s: %v", tt.name, body, err)
			} else if len(runs.Runs) != 0 {
				t.Errorf("%s: got %d runs, want 0 on a new data dir", tt.name, len(runs.Runs))
			}
		}
	}
}

// get sends GET url, with a bearer token when token is set, and returns
// the status and up to 64 KiB of the body.
func get(ctx context.Context, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// checkNonRoot checks that the container runs as the image's user and
// that every process in it (the orchestrator) has that uid.
func checkNonRoot(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	insp, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect container %s: %v", id, err)
	}
	if insp.Config == nil || insp.Config.User != imageUser {
		t.Errorf("container user: got %+v, want %q", insp.Config, imageUser)
	}
	top, err := cli.ContainerTop(ctx, id, []string{"-o", "pid,uid,args"})
	if err != nil {
		t.Fatalf("list the processes of container %s: %v", id, err)
	}
	uidCol, argsCol := slices.Index(top.Titles, "UID"), slices.Index(top.Titles, "COMMAND")
	if uidCol < 0 || argsCol < 0 {
		t.Fatalf("container top: got titles %q, want UID and COMMAND", top.Titles)
	}
	orchestrators := 0
	for _, p := range top.Processes {
		if p[uidCol] != imageUID {
			t.Errorf("process %q: got uid %s, want %s", p[argsCol], p[uidCol], imageUID)
		}
		if strings.Contains(p[argsCol], "kici-orchestrator") {
			orchestrators++
		}
	}
	if orchestrators != 1 {
		t.Errorf("container top: got %d kici-orchestrator processes in %q, want 1", orchestrators, top.Processes)
	}
}

// checkCleanStop stops the container as `docker stop` does (SIGTERM, then
// SIGKILL after the grace) and checks that the orchestrator exited 0 on
// its own: as PID 1 it must handle SIGTERM itself.
func checkCleanStop(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stopTimeout+callTimeout)
	defer cancel()
	grace := int(stopTimeout / time.Second)
	start := time.Now()
	if err := cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &grace}); err != nil {
		t.Fatalf("stop container %s: %v", id, err)
	}
	took := time.Since(start)
	insp, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect container %s: %v", id, err)
	}
	if insp.State == nil || insp.State.Running || insp.State.ExitCode != 0 || insp.State.OOMKilled {
		t.Errorf("after docker stop: got state %+v, want exited with 0", insp.State)
	}
	if took >= stopTimeout {
		t.Errorf("docker stop took %s: the orchestrator did not exit on SIGTERM within the grace", took)
	}
	t.Logf("stopped cleanly in %s", took.Round(time.Millisecond))
}

// containerLogs returns the container's stdout and stderr.
func containerLogs(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rc, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return fmt.Sprintf("(read the container log: %v)", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		fmt.Fprintf(&out, "\n(read the container log: %v)", err)
	}
	return out.String()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
