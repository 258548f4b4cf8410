package config

import (
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr string // a part of the error; "" for none
	}{
		{name: "kibibytes", in: "1k", want: 1024},
		{name: "upper-case unit", in: "1K", want: 1024},
		{name: "mebibytes", in: "512m", want: 512 << 20},
		{name: "gibibytes", in: "2g", want: 2 << 30},
		{name: "upper-case G", in: "2G", want: 2 << 30},
		{name: "fraction", in: "1.5g", want: 3 << 29},
		{name: "fraction floored", in: "0.1k", want: 102},
		{name: "fraction floored exactly", in: "0.3k", want: 307},
		{name: "space before unit", in: "64 k", want: 64 << 10},
		{name: "tab before unit", in: "64\tm", want: 64 << 20},
		{name: "leading zeros", in: "007m", want: 7 << 20},
		{name: "large", in: "8589934591g", want: 1<<63 - 1<<30},
		{name: "large fraction floored", in: "8589934591.999999999g", want: 1<<63 - 2},
		{name: "largest", in: "9007199254740991.9990234375k", want: 1<<63 - 1},
		{name: "one past the largest", in: "9007199254740992k", wantErr: "too large"},
		{name: "too large", in: "8589934592g", wantErr: "too large"},
		{name: "less than a byte", in: "0.0001k", wantErr: "less than one byte"},
		{name: "zero", in: "0m", wantErr: "less than one byte"},
		{name: "bare number", in: "1024", wantErr: "use a number and a unit"},
		{name: "Mi suffix", in: "512Mi", wantErr: "use a number and a unit"},
		{name: "terabytes", in: "1t", wantErr: "use a number and a unit"},
		{name: "bytes unit", in: "1b", wantErr: "use a number and a unit"},
		{name: "negative", in: "-1g", wantErr: "use a number and a unit"},
		{name: "leading dot", in: ".5g", wantErr: "use a number and a unit"},
		{name: "trailing dot", in: "5.g", wantErr: "use a number and a unit"},
		{name: "exponent", in: "1e3k", wantErr: "use a number and a unit"},
		{name: "leading space", in: " 1g", wantErr: "use a number and a unit"},
		{name: "trailing space", in: "1g ", wantErr: "use a number and a unit"},
		{name: "unicode digit", in: "١g", wantErr: "use a number and a unit"},
		{name: "empty", in: "", wantErr: "use a number and a unit"},
		{name: "too long", in: strings.Repeat("1", 70) + "g", wantErr: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseMemory(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseMemory(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMemory(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseMemory(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestMemoryText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   int64
		want string
	}{
		{name: "gibibytes", in: 2 << 30, want: "2g"},
		{name: "mebibytes", in: 1536 << 20, want: "1536m"},
		{name: "kibibytes", in: 3 << 10, want: "3k"},
		{name: "bytes", in: 102, want: "102 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := memoryText(tt.in); got != tt.want {
				t.Errorf("memoryText(%d) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
