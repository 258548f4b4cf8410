package fakevm

import (
	"strings"
	"testing"
)

func TestParseFirecrackerArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, f fcFlags)
	}{
		{name: "defaults", check: func(t *testing.T, f fcFlags) {
			if f.apiSock != "/run/firecracker.socket" || f.id != "anonymous-instance" || f.payloadLimit != 51200 || f.mmdsSizeLimit != 51200 {
				t.Errorf("got %+v, want the defaults", f)
			}
		}},
		{name: "what the jailer passes", args: []string{"--id", "vm-1", "--start-time-us", "12", "--start-time-cpu-us", "3", "--parent-cpu-time-us", "4",
			"--config-file", "/config.json", "--log-path", "/vmm.log", "--level", "Warning", "--mmds-size-limit", "1000", "--boot-timer"},
			check: func(t *testing.T, f fcFlags) {
				if f.id != "vm-1" || f.configFile != "/config.json" || f.logPath != "/vmm.log" || f.mmdsSizeLimit != 1000 {
					t.Errorf("got %+v", f)
				}
			}},
		{name: "unknown argument", args: []string{"--kernel", "x"}, wantErr: "Found argument 'kernel' which wasn't expected"},
		{name: "not an argument", args: []string{"vm-1"}, wantErr: "Found argument 'vm-1' which wasn't expected"},
		{name: "duplicate", args: []string{"--id", "a", "--id", "b"}, wantErr: "The argument 'id' was provided more than once."},
		{name: "missing value", args: []string{"--api-sock"}, wantErr: "The argument 'api-sock' requires a value"},
		{name: "no-api needs a config file", args: []string{"--no-api"}, wantErr: "Argument 'config-file' required, but not found."},
		{name: "bad level", args: []string{"--level", "Loud"}, wantErr: "Invalid value for logger level"},
		{name: "bad id", args: []string{"--id", "a_b"}, wantErr: "Invalid instance ID: Invalid char (_) at position 1"},
		{name: "bad start time", args: []string{"--start-time-us", "-1"}, wantErr: "'start-time-us' parameter expected to be of 'u64' type."},
		{name: "help wins", args: []string{"--nope", "--help"}, check: func(t *testing.T, f fcFlags) {
			if !f.help {
				t.Error("got help false, want true")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := parseFirecrackerArgs(tt.args)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("got error %v, want nil", err)
			default:
				tt.check(t, f)
			}
		})
	}
}
