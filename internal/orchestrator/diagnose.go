package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/config"
	"github.com/kici-dev/kici/internal/scaler/container"
)

// Thresholds of the data dir's free-space check: it fails under either.
const (
	minFreeBytes   = 1 << 30 // 1 GiB
	minFreePercent = 5
)

// diagnoseTimeout bounds each check that talks to something else (the
// database, a container engine).
const diagnoseTimeout = 10 * time.Second

// Diagnose checks what the orchestrator depends on, where its data lives:
// the database and its migrations, free space in the data dir, the secret
// key and the job-token key, and each configured scaler's backend (the
// agent binary of a bare-metal label set; the engine and the image of a
// container one). Every check is in the answer, passed or failed, in a
// fixed order; a failed one carries a one-line fix.
func (s *Server) Diagnose(ctx context.Context) []apiv1.DiagnoseCheck {
	var out []apiv1.DiagnoseCheck
	out = append(out, s.checkDatabase(ctx)...)
	out = append(out, s.checkDiskFree())
	out = append(out, s.checkSecretKey(ctx))
	out = append(out, s.checkJobTokenKey())
	out = append(out, s.checkScalers(ctx)...)
	return out
}

func pass(name, detail string) apiv1.DiagnoseCheck {
	return apiv1.DiagnoseCheck{Name: name, OK: true, Detail: detail}
}

func fail(name, detail, fix string) apiv1.DiagnoseCheck {
	return apiv1.DiagnoseCheck{Name: name, Detail: detail, Fix: fix}
}

// oneLine keeps an error message to its first line.
func oneLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

func (s *Server) checkDatabase(ctx context.Context) []apiv1.DiagnoseCheck {
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	start := time.Now()
	if err := s.db.Ping(ctx); err != nil {
		return []apiv1.DiagnoseCheck{
			fail("database", oneLine(err), "start the database or fix KICI_DATABASE_URL, then check the orchestrator can reach it"),
			fail("migrations", "not checked: the database is unreachable", "make the database reachable first"),
		}
	}
	db := pass("database", fmt.Sprintf("%s reachable, ping %s", s.db.Dialect(), time.Since(start).Round(time.Microsecond)))
	st, err := s.db.MigrationStatus(ctx)
	var mig apiv1.DiagnoseCheck
	switch {
	case err != nil:
		mig = fail("migrations", oneLine(err), "check the database user may read the goose version table")
	case st.Current > st.Head:
		mig = fail("migrations", st.String(), "run the kici-orchestrator release that migrated the database (a newer one)")
	case !st.UpToDate():
		mig = fail("migrations", st.String(), "run `kici-orchestrator migrate`, or restart the orchestrator (it migrates at start)")
	default:
		mig = pass("migrations", st.String())
	}
	return []apiv1.DiagnoseCheck{db, mig}
}

func (s *Server) checkDiskFree() apiv1.DiagnoseCheck {
	const name = "data dir free space"
	free, total, err := diskFree(s.cfg.DataDir)
	if err != nil {
		return fail(name, fmt.Sprintf("%s: %v", s.cfg.DataDir, err), "check that KICI_DATA_DIR exists and is readable by the orchestrator")
	}
	pct := 100.0
	if total > 0 {
		pct = float64(free) * 100 / float64(total)
	}
	detail := fmt.Sprintf("%s free of %s (%.1f%%) in %s", bytesIEC(free), bytesIEC(total), pct, s.cfg.DataDir)
	if free < minFreeBytes || pct < minFreePercent {
		return fail(name, detail, fmt.Sprintf("free space on that file system (old logs under %s) or move KICI_DATA_DIR; want at least 1 GiB and %d%%",
			filepath.Join(s.cfg.DataDir, "logs"), minFreePercent))
	}
	return pass(name, detail)
}

// bytesIEC formats n with a binary unit: "3.2 GiB".
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (s *Server) checkSecretKey(ctx context.Context) apiv1.DiagnoseCheck {
	const name = "secret key"
	if s.secrets == nil {
		return fail(name, "not loaded", "set KICI_SECRET_KEY and restart the orchestrator")
	}
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	desc, err := s.secrets.CheckKey(ctx)
	if err != nil {
		return fail(name, desc+": "+oneLine(err),
			"set KICI_SECRET_KEY (or the key file) to the key the secrets were sealed with; after `kici-admin secrets rotate-key`, use the new key")
	}
	return pass(name, desc+", matches the stored key check")
}

func (s *Server) checkJobTokenKey() apiv1.DiagnoseCheck {
	const name = "job-token key"
	path := filepath.Join(s.cfg.DataDir, "job-token.key")
	fix := "restore " + path + " from a backup, or restart the orchestrator to generate one (tokens of running jobs stop working)"
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fail(name, path+" is missing", fix)
	case err != nil:
		return fail(name, oneLine(err), "make "+path+" readable by the orchestrator")
	case fi.Size() != 32:
		return fail(name, fmt.Sprintf("%s holds %d bytes, want 32", path, fi.Size()), fix)
	}
	return pass(name, path+" present")
}

// checkScalers checks the backends of the configuration the auto-scaler
// runs (the last one applied), not the file as it is now.
func (s *Server) checkScalers(ctx context.Context) []apiv1.DiagnoseCheck {
	if s.scalers == nil {
		return []apiv1.DiagnoseCheck{pass("scalers", "no auto-scaler configured (KICI_SCALER_CONFIG_PATH is unset)")}
	}
	s.scalers.mu.Lock()
	file := s.scalers.file
	s.scalers.mu.Unlock()
	if len(file.Scalers) == 0 {
		return []apiv1.DiagnoseCheck{pass("scalers", "the auto-scaler runs with no scalers configured")}
	}
	var out []apiv1.DiagnoseCheck
	recent := s.scalers.manager.RecentFailures(scaler.FailureWindow)
	for _, c := range file.Scalers {
		out = append(out, failureRow(c.Name, recent[c.Name]))
		switch c.Type {
		case config.TypeBareMetal:
			out = append(out, checkBareMetal(c)...)
		case config.TypeContainer:
			out = append(out, s.checkContainer(ctx, c)...)
		case config.TypeFirecracker:
			out = append(out, s.checkHost(c)...)
		default:
			out = append(out, fail("scaler "+c.Name, "unknown type "+c.Type, "fix the scaler's type in "+s.cfg.ScalerConfigPath))
		}
	}
	return out
}

func labelsOf(ls config.LabelSet) string { return "[" + strings.Join(ls.Labels, ",") + "]" }

// failureRow is a scaler's spawn failures of the last five minutes: any
// failure of a spawn for a job fails the row, failures of warm spawns
// only warn.
func failureRow(name string, f scaler.FailureSummary) apiv1.DiagnoseCheck {
	row := "scaler " + name + ": spawn failures"
	if f.Bound+f.Unbound == 0 {
		return pass(row, "0 spawn failures in last 5m")
	}
	last, _, _ := strings.Cut(f.LastError, "\n")
	if len(last) > 120 {
		last = last[:119] + "…"
	}
	detail := fmt.Sprintf("%d spawn failures in last 5m (%d bound, %d warm-pool; last: %s)", f.Bound+f.Unbound, f.Bound, f.Unbound, last)
	if f.Bound == 0 {
		return pass(row, "warning: "+detail)
	}
	return fail(row, detail, "see the job's provisioning log and `kici-admin scaler status`; after fixing the host, `kici-admin scaler retry "+name+"`")
}

// checkHost reports the host checks of a running scaler's backend (a
// warning passes, with its detail saying what is missing).
func (s *Server) checkHost(c config.Scaler) []apiv1.DiagnoseCheck {
	var out []apiv1.DiagnoseCheck
	for _, st := range s.scalers.manager.Status() {
		if st.Name != c.Name {
			continue
		}
		for _, hc := range st.Checks {
			name := fmt.Sprintf("scaler %s: %s", c.Name, hc.Name)
			switch hc.Status {
			case "pass":
				out = append(out, pass(name, hc.Detail))
			case "warn":
				out = append(out, pass(name, "warning: "+hc.Detail+" ("+hc.Fix+")"))
			default:
				out = append(out, fail(name, hc.Detail, hc.Fix))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, fail("scaler "+c.Name, "not running", "check the orchestrator's log for why the scaler did not start"))
	}
	return out
}

func checkBareMetal(c config.Scaler) []apiv1.DiagnoseCheck {
	var out []apiv1.DiagnoseCheck
	for _, ls := range c.LabelSets {
		name := fmt.Sprintf("scaler %s: binary %s", c.Name, labelsOf(ls))
		fix := fmt.Sprintf("install kici-agent at %s or fix binaryPath in scalers.yaml", ls.BinaryPath)
		fi, err := os.Stat(ls.BinaryPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, fail(name, ls.BinaryPath+" does not exist", fix))
		case err != nil:
			out = append(out, fail(name, oneLine(err), fix))
		case fi.IsDir():
			out = append(out, fail(name, ls.BinaryPath+" is a directory", fix))
		case fi.Mode().Perm()&0o111 == 0:
			out = append(out, fail(name, ls.BinaryPath+" is not executable", "chmod +x "+ls.BinaryPath))
		default:
			out = append(out, pass(name, ls.BinaryPath+" is executable"))
		}
	}
	return out
}

// checkContainer connects to the scaler's engine with a client of its own
// (the running backend is left alone), then looks for each label set's
// image.
func (s *Server) checkContainer(ctx context.Context, c config.Scaler) []apiv1.DiagnoseCheck {
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	engine := fmt.Sprintf("scaler %s: engine", c.Name)
	b, err := container.New(ctx, nil, container.Config{
		Name: c.Name, Instance: "diagnose", Host: c.Container.Host, SocketPath: c.Container.SocketPath,
		Runtime: c.Container.Runtime,
	})
	if err != nil {
		return []apiv1.DiagnoseCheck{fail(engine, oneLine(err),
			"start Docker or Podman, make its socket readable by the orchestrator, or fix socketPath/host in scalers.yaml")}
	}
	defer func() { _ = b.Close(context.WithoutCancel(ctx)) }()
	out := []apiv1.DiagnoseCheck{pass(engine, b.Runtime()+" answers")}
	for _, ls := range c.LabelSets {
		name := fmt.Sprintf("scaler %s: image %s", c.Name, labelsOf(ls))
		ok, err := b.ImagePresent(ctx, ls.Image)
		switch {
		case err != nil:
			out = append(out, fail(name, oneLine(err), "check the engine answers `docker image inspect "+ls.Image+"`"))
		case !ok:
			// Even when the pull policy would pull it at the first spawn,
			// that spawn waits for the pull (or fails on an air-gapped host).
			out = append(out, fail(name, fmt.Sprintf("%s is not present locally (pull policy %s)", ls.Image, ls.ImagePullPolicy),
				"docker pull "+ls.Image+" or build it"))
		default:
			out = append(out, pass(name, ls.Image+" present"))
		}
	}
	return out
}
