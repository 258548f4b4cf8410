package admincli

import (
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
)

// The fake's diagnose: under {url} every check passes; under
// {url}/failing a bare-metal binary and a container image are missing.
func (f *fakeAPI) diagnoseRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+diagnosePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSONStatus(w, http.StatusOK, apiv1.Diagnosis{Checks: fakeChecks(false)})
	})
	mux.HandleFunc("GET "+fakeFailing+diagnosePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSONStatus(w, http.StatusOK, apiv1.Diagnosis{Checks: fakeChecks(true)})
	})
}

func fakeChecks(failing bool) []apiv1.DiagnoseCheck {
	checks := []apiv1.DiagnoseCheck{
		{Name: "database", OK: true, Detail: "postgres reachable, ping 412µs"},
		{Name: "migrations", OK: true, Detail: "schema version 16, up to date"},
		{Name: "data dir free space", OK: true, Detail: "74.5 GiB free of 252.0 GiB (29.6%) in /var/lib/kici"},
		{Name: "secret key", OK: true, Detail: "KICI_SECRET_KEY (key:b397c98a72f1b5a1), key version 1, matches the stored key check"},
		{Name: "job-token key", OK: true, Detail: "/var/lib/kici/job-token.key present"},
		{Name: "scaler metal: binary [linux,x64]", OK: true, Detail: "/usr/local/bin/kici-agent is executable"},
		{Name: "scaler docker: engine", OK: true, Detail: "docker answers"},
		{Name: "scaler docker: image [docker,linux]", OK: true, Detail: "kici-agent:dev present"},
	}
	if failing {
		checks[5] = apiv1.DiagnoseCheck{Name: "scaler metal: binary [linux,x64]", Detail: "/opt/kici/kici-agent does not exist",
			Fix: "install kici-agent at /opt/kici/kici-agent or fix binaryPath in scalers.yaml"}
		checks[7] = apiv1.DiagnoseCheck{Name: "scaler docker: image [docker,linux]", Detail: "kici-agent:dev is not present locally (pull policy Never)",
			Fix: "docker pull kici-agent:dev or build it"}
	}
	return checks
}
