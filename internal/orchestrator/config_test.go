package orchestrator

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "defaults", env: map[string]string{}, check: func(t *testing.T, c Config) {
			if c.HTTPAddr != ":4000" || c.QueueTimeout != time.Hour || c.DispatchAckTimeout != 10*time.Second ||
				c.AgentRecoveryWindow != 120*time.Second || c.QueueSweepInterval != time.Minute || c.AgentAuth != "token" ||
				c.ArchiveCacheEntries != 8 || c.RunRetention != 0 || c.AuditRetention != 0 || c.RetentionSweepInterval != time.Hour ||
				c.InstanceHeartbeat != 2*time.Second {
				t.Errorf("got %+v, want the contract's defaults", c)
			}
		}},
		{name: "milliseconds", env: map[string]string{"KICI_QUEUE_TIMEOUT_MS": "0", "KICI_DISPATCH_ACK_TIMEOUT_MS": "250"}, check: func(t *testing.T, c Config) {
			if c.QueueTimeout != 0 || c.DispatchAckTimeout != 250*time.Millisecond {
				t.Errorf("got queue timeout %s, ack timeout %s; want 0 and 250ms", c.QueueTimeout, c.DispatchAckTimeout)
			}
		}},
		{name: "instance heartbeat", env: map[string]string{"KICI_INSTANCE_HEARTBEAT_MS": "200"}, check: func(t *testing.T, c Config) {
			if c.InstanceHeartbeat != 200*time.Millisecond || c.instanceTTL() != time.Second {
				t.Errorf("got heartbeat %s, TTL %s; want 200ms and 1s", c.InstanceHeartbeat, c.instanceTTL())
			}
		}},
		{name: "bad number", env: map[string]string{"KICI_QUEUE_TIMEOUT_MS": "1h"}, wantErr: `KICI_QUEUE_TIMEOUT_MS="1h"`},
		{name: "zero ack timeout", env: map[string]string{"KICI_DISPATCH_ACK_TIMEOUT_MS": "0"}, wantErr: "KICI_DISPATCH_ACK_TIMEOUT_MS: must be greater than 0"},
		{name: "auth none beyond loopback", env: map[string]string{"KICI_AGENT_AUTH": "none"}, wantErr: "only allowed when KICI_HTTP_ADDR listens on loopback"},
		{name: "auth none on loopback", env: map[string]string{"KICI_AGENT_AUTH": "none", "KICI_HTTP_ADDR": "127.0.0.1:4000"}},
		{name: "cluster role and schedule refresh", env: map[string]string{"KICI_CLUSTER_ROLE": "coordinator", "KICI_DATABASE_URL": "postgres://db/kici",
			"KICI_SECRET_KEY": strings.Repeat("ab", 32), "KICI_SCHEDULE_REFRESH_MS": "1500"}, check: func(t *testing.T, c Config) {
			if c.ClusterRole != RoleCoordinator || c.ScheduleRefresh != 1500*time.Millisecond {
				t.Errorf("got role %q, refresh %s; want coordinator and 1.5s", c.ClusterRole, c.ScheduleRefresh)
			}
		}},
		{name: "default role and refresh", env: map[string]string{}, check: func(t *testing.T, c Config) {
			if c.ClusterRole != RoleStandalone || c.ScheduleRefresh != 5*time.Minute {
				t.Errorf("got role %q, refresh %s; want standalone and 5m", c.ClusterRole, c.ScheduleRefresh)
			}
		}},
		{name: "lease ttl under three renewals", env: map[string]string{"KICI_CLUSTER_ROLE": "coordinator", "KICI_DATABASE_URL": "postgres://db/kici",
			"KICI_SECRET_KEY": strings.Repeat("ab", 32), "KICI_CLUSTER_LEASE_TTL_MS": "1000", "KICI_CLUSTER_LEASE_RENEW_MS": "500"},
			wantErr: "KICI_CLUSTER_LEASE_TTL_MS=1000 must be at least 3 times KICI_CLUSTER_LEASE_RENEW_MS=500"},
		{name: "lease defaults", env: map[string]string{}, check: func(t *testing.T, c Config) {
			if c.LeaderLeaseTTL != 10*time.Second || c.LeaderLeaseRenew != 2*time.Second {
				t.Errorf("lease ttl %s, renew %s; want 10s and 2s", c.LeaderLeaseTTL, c.LeaderLeaseRenew)
			}
		}},
		{name: "coordinator needs postgres", env: map[string]string{"KICI_CLUSTER_ROLE": "coordinator"}, wantErr: "KICI_CLUSTER_ROLE=coordinator needs PostgreSQL"},
		{name: "worker without coordinators", env: map[string]string{"KICI_CLUSTER_ROLE": "worker"}, wantErr: "KICI_CLUSTER_ROLE=worker needs KICI_CLUSTER_COORDINATOR_URLS"},
		{name: "worker with a database", env: map[string]string{"KICI_CLUSTER_ROLE": "worker", "KICI_CLUSTER_COORDINATOR_URLS": "http://c:4000",
			"KICI_DATABASE_URL": "postgres://db/kici", "KICI_SECRET_KEY": strings.Repeat("ab", 32)}, wantErr: "a worker has no database"},
		{name: "worker with a bad coordinator URL", env: map[string]string{"KICI_CLUSTER_ROLE": "worker", "KICI_CLUSTER_COORDINATOR_URLS": "http://c:4000, ws://c:4000/ws"},
			wantErr: `KICI_CLUSTER_COORDINATOR_URLS: "ws://c:4000/ws"`},
		{name: "unknown role", env: map[string]string{"KICI_CLUSTER_ROLE": "leader"}, wantErr: `KICI_CLUSTER_ROLE="leader": want standalone, coordinator or worker`},
		{name: "bad database url", env: map[string]string{"KICI_DATABASE_URL": "mysql://x"}, wantErr: "want a postgres:// URL"},
		{name: "bad public url", env: map[string]string{"KICI_PUBLIC_URL": "ftp://x"}, wantErr: "KICI_PUBLIC_URL"},
		{name: "postgres needs a secret key", env: map[string]string{"KICI_DATABASE_URL": "postgres://db/kici"}, wantErr: "KICI_SECRET_KEY: required with PostgreSQL"},
		{name: "postgres with a secret key", env: map[string]string{"KICI_DATABASE_URL": "postgres://db/kici", "KICI_SECRET_KEY": strings.Repeat("0f", 32)}},
		{name: "bad secret key", env: map[string]string{"KICI_SECRET_KEY": "letmein"}, wantErr: "KICI_SECRET_KEY: want 64 hex digits"},
		{name: "auth failure limit", env: map[string]string{"KICI_AUTH_FAILURE_LIMIT": "-1"}, check: func(t *testing.T, c Config) {
			if c.AuthFailureLimit != -1 {
				t.Errorf("got AuthFailureLimit %d, want -1", c.AuthFailureLimit)
			}
		}},
		{name: "bad auth failure limit", env: map[string]string{"KICI_AUTH_FAILURE_LIMIT": "many"}, wantErr: `KICI_AUTH_FAILURE_LIMIT="many"`},
		{name: "archive cache off", env: map[string]string{"KICI_ARCHIVE_CACHE_ENTRIES": "0"}, check: func(t *testing.T, c Config) {
			if c.ArchiveCacheEntries != 0 {
				t.Errorf("got ArchiveCacheEntries %d, want 0", c.ArchiveCacheEntries)
			}
		}},
		{name: "trusted proxies", env: map[string]string{"KICI_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7,::1"}, check: func(t *testing.T, c Config) {
			want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("::1/128")}
			if !slices.Equal(c.TrustedProxies, want) {
				t.Errorf("got TrustedProxies %v, want %v", c.TrustedProxies, want)
			}
		}},
		{name: "bad trusted proxy", env: map[string]string{"KICI_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"}, wantErr: `"proxy.internal" is not an address or a CIDR prefix`},
		{name: "retention", env: map[string]string{"KICI_RUN_RETENTION_DAYS": "30", "KICI_AUDIT_RETENTION_DAYS": "400", "KICI_RETENTION_SWEEP_INTERVAL_MS": "500"}, check: func(t *testing.T, c Config) {
			if c.RunRetention != 30*24*time.Hour || c.AuditRetention != 400*24*time.Hour || c.WebhookEventRetention != 0 || c.RetentionSweepInterval != 500*time.Millisecond {
				t.Errorf("got run %s, audit %s, webhook events %s, sweep %s; want 720h, 9600h, 0 (keep), 500ms",
					c.RunRetention, c.AuditRetention, c.WebhookEventRetention, c.RetentionSweepInterval)
			}
		}},
		{name: "bad retention", env: map[string]string{"KICI_RUN_RETENTION_DAYS": "30d"}, wantErr: `KICI_RUN_RETENTION_DAYS="30d": want a whole number of days`},
		{name: "negative archive cache", env: map[string]string{"KICI_ARCHIVE_CACHE_ENTRIES": "-3"}, wantErr: `KICI_ARCHIVE_CACHE_ENTRIES="-3"`},
		{name: "jobs per run default", env: map[string]string{}, check: func(t *testing.T, c Config) {
			if c.MaxJobsPerRun != 1000 {
				t.Errorf("got MaxJobsPerRun %d, want 1000", c.MaxJobsPerRun)
			}
		}},
		{name: "jobs per run", env: map[string]string{"KICI_MAX_JOBS_PER_RUN": "50"}, check: func(t *testing.T, c Config) {
			if c.MaxJobsPerRun != 50 {
				t.Errorf("got MaxJobsPerRun %d, want 50", c.MaxJobsPerRun)
			}
		}},
		{name: "zero jobs per run", env: map[string]string{"KICI_MAX_JOBS_PER_RUN": "0"}, wantErr: `KICI_MAX_JOBS_PER_RUN="0": want a whole number >= 1`},
		{name: "github app", env: map[string]string{"KICI_GITHUB_APP_ID": "12345", "KICI_GITHUB_APP_KEY_FILE": "/etc/kici/app.pem", "KICI_GITHUB_API_URL": "https://ghe.example.com/api/v3"}, check: func(t *testing.T, c Config) {
			if c.GitHubAppID != 12345 || c.GitHubAppKeyFile != "/etc/kici/app.pem" || c.GitHubAPIURL != "https://ghe.example.com/api/v3" {
				t.Errorf("got app %d, key file %q, API %q; want 12345, /etc/kici/app.pem, the GHE URL", c.GitHubAppID, c.GitHubAppKeyFile, c.GitHubAPIURL)
			}
		}},
		{name: "github token", env: map[string]string{"KICI_GITHUB_TOKEN": "ghp_x"}, check: func(t *testing.T, c Config) {
			if c.GitHubToken != "ghp_x" || c.GitHubAppID != 0 {
				t.Errorf("got token %q, app %d; want ghp_x and no app", c.GitHubToken, c.GitHubAppID)
			}
		}},
		{name: "bad github app id", env: map[string]string{"KICI_GITHUB_APP_ID": "kici", "KICI_GITHUB_APP_KEY_FILE": "/k"}, wantErr: `KICI_GITHUB_APP_ID="kici"`},
		{name: "github app without key", env: map[string]string{"KICI_GITHUB_APP_ID": "1"}, wantErr: "KICI_GITHUB_APP_KEY_FILE: required with KICI_GITHUB_APP_ID"},
		{name: "github key without app", env: map[string]string{"KICI_GITHUB_APP_KEY_FILE": "/k"}, wantErr: "KICI_GITHUB_APP_ID: required with KICI_GITHUB_APP_KEY_FILE"},
		{name: "bad github api url", env: map[string]string{"KICI_GITHUB_API_URL": "api.github.com"}, wantErr: `KICI_GITHUB_API_URL="api.github.com"`},
		{name: "bad jobs per run", env: map[string]string{"KICI_MAX_JOBS_PER_RUN": "lots"}, wantErr: `KICI_MAX_JOBS_PER_RUN="lots": want a whole number >= 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := ConfigFromEnv(func(k string) string { return tt.env[k] }, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestUnknownVariablesAreReported(t *testing.T) {
	t.Parallel()
	_, warnings, err := ConfigFromEnv(func(string) string { return "" }, []string{
		"KICI_QUEUE_TIMEOUT=5", "KICI_DATA_DIR=/x", "PATH=/bin", "KICI_TOTALLY_NEW=1",
		"KICI_EVENT_BRANCH=main", "KICI_RUN_ID=r", // set for job steps: not the orchestrator's
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"unknown variable KICI_QUEUE_TIMEOUT (did you mean KICI_QUEUE_TIMEOUT_MS?)",
		"unknown variable KICI_TOTALLY_NEW",
	}
	if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("got warnings %q, want %q", warnings, want)
	}
}
