package vmproc

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// fields is field 3 onwards of a real line, with start time 4242.
	const fields = " S 1 123 123 0 -1 4194560 150 0 0 0 0 0 0 0 20 0 1 0 4242 2265088 126 18446744073709551615"
	tests := []struct {
		name    string
		line    string
		want    procStat
		wantErr bool
	}{
		{"plain", "123 (firecracker)" + fields, procStat{state: 'S', startTicks: 4242}, false},
		{"comm with parentheses and spaces", "123 (fire) (crack er)" + fields, procStat{state: 'S', startTicks: 4242}, false},
		{"comm that looks like fields", "123 (x) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99 0)" + fields, procStat{state: 'S', startTicks: 4242}, false},
		{"zombie", "123 (firecracker) Z 1 123 123 0 -1 4194560 150 0 0 0 0 0 0 0 20 0 1 0 7 0 0 0", procStat{state: 'Z', startTicks: 7}, false},
		{"no command name", "123 firecracker" + fields, procStat{}, true},
		{"too few fields", "123 (firecracker) S 1 2 3", procStat{}, true},
		{"bad start time", "123 (firecracker) S 1 123 123 0 -1 4194560 150 0 0 0 0 0 0 0 20 0 1 0 soon 0 0", procStat{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseStat: got error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(procStat{})); diff != "" {
				t.Errorf("parseStat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want int // 0 = errBadPID
	}{
		{"plain", "4242", 4242},
		{"newline", "4242\n", 4242},
		{"zero", "0", 0},
		{"negative", "-1", 0},
		{"empty", "", 0},
		{"garbage", "firecracker", 0},
		{"two numbers", "12 34", 0},
		{"overflow", "99999999999999999999999", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePID([]byte(tc.data))
			if tc.want == 0 {
				if !errors.Is(err, errBadPID) {
					t.Errorf("parsePID(%q): got %d, %v, want errBadPID", tc.data, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parsePID(%q): got %d, %v, want %d", tc.data, got, err, tc.want)
			}
		})
	}
}

func TestStartedAt(t *testing.T) {
	t.Parallel()
	boot := time.Unix(1_700_000_000, 0)
	if got, want := startedAt(boot, 12345), boot.Add(123450*time.Millisecond); !got.Equal(want) {
		t.Errorf("startedAt: got %s, want %s", got, want)
	}
}

func TestStateZeroIsUnconfirmed(t *testing.T) {
	t.Parallel()
	var id Identity
	if id.State != Unconfirmed || !id.Running() {
		t.Errorf("zero Identity: got %s, Running %v, want unconfirmed and running (the safe answer)", id.State, id.Running())
	}
}
