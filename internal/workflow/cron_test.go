package workflow

import (
	"strings"
	"testing"
	"time"
)

func TestParseCron(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 12, 2, 10, 17, 30, 0, time.UTC) // a Wednesday
	for _, tc := range []struct {
		spec    string
		next    time.Time // the first tick after from
		wantErr string
	}{
		{spec: "* * * * *", next: time.Date(2026, 12, 2, 10, 18, 0, 0, time.UTC)},
		{spec: " 0 3 * * 1-5 ", next: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)},
		{spec: "@daily", next: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)},
		{spec: "*/15 * * * *", next: time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)},
		{spec: "@every 5m", wantErr: "@every is not supported"},
		{spec: "TZ=Europe/Paris 0 3 * * *", wantErr: "time zone prefix is not supported"},
		{spec: "CRON_TZ=UTC 0 3 * * *", wantErr: "time zone prefix is not supported"},
		{spec: "0 3 * * * *", wantErr: "expected exactly 5 fields"},
		{spec: "61 * * * *", wantErr: "above maximum"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			s, err := ParseCron(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(from); !got.Equal(tc.next) {
				t.Errorf("next tick after %v: got %v, want %v", from, got, tc.next)
			}
		})
	}
}
