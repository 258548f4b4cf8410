package overlay_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler/firecracker/overlay"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  overlay.Config
		want string // "" = valid
	}{
		{"defaults", overlay.Config{Dir: "/var/lib/kici/jailer/firecracker/.overlay-templates"}, ""},
		{"timeouts", overlay.Config{Dir: "/t", MkfsTimeout: time.Minute, CopyTimeout: time.Second}, ""},
		{"no dir", overlay.Config{}, "Dir is required"},
		{"relative dir", overlay.Config{Dir: "templates"}, "Dir"},
		{"negative mkfs timeout", overlay.Config{Dir: "/t", MkfsTimeout: -time.Second}, "MkfsTimeout"},
		{"negative copy timeout", overlay.Config{Dir: "/t", CopyTimeout: -time.Second}, "CopyTimeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestTemplatePath(t *testing.T) {
	t.Parallel()
	got := overlay.TemplatePath(overlay.TemplateDir("/srv/jailer"), 2048)
	if want := "/srv/jailer/firecracker/.overlay-templates/overlay-2048mib.ext4"; got != want {
		t.Errorf("TemplatePath: got %q, want %q", got, want)
	}
}

// TestValid checks the validity rule on hand-made files: only the size
// and the superblock magic count.
func TestValid(t *testing.T) {
	t.Parallel()
	const size = 1
	// write makes a file of n bytes with magic at the ext4 magic offset.
	write := func(t *testing.T, path string, n int64, magic []byte) {
		t.Helper()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(magic, 1024+0x38); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want bool
	}{
		{"magic and size", func(t *testing.T, path string) { write(t, path, size<<20, []byte{0x53, 0xef}) }, true},
		{"big-endian magic", func(t *testing.T, path string) { write(t, path, size<<20, []byte{0xef, 0x53}) }, false},
		{"zero magic", func(t *testing.T, path string) { write(t, path, size<<20, []byte{0, 0}) }, false},
		{"one byte short", func(t *testing.T, path string) { write(t, path, size<<20-1, []byte{0x53, 0xef}) }, false},
		{"one byte long", func(t *testing.T, path string) { write(t, path, size<<20+1, []byte{0x53, 0xef}) }, false},
		{"missing", func(t *testing.T, path string) {}, false},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink", func(t *testing.T, path string) {
			target := path + ".target"
			write(t, target, size<<20, []byte{0x53, 0xef})
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "overlay-1mib.ext4")
			tc.make(t, path)
			if got := overlay.Valid(path, size); got != tc.want {
				t.Errorf("Valid: got %v, want %v", got, tc.want)
			}
		})
	}
}
