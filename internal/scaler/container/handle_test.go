package container

import (
	"errors"
	"testing"
)

func TestBlob(t *testing.T) {
	t.Parallel()
	if got, want := string(encodeBlob("abc123")), `{"v":1,"container_id":"abc123"}`; got != want {
		t.Errorf("encodeBlob = %s, want %s", got, want)
	}
	tests := []struct {
		name    string
		blob    string
		want    string // container id; "" means an error
		wantErr bool
	}{
		{name: "v1", blob: `{"v":1,"container_id":"abc123"}`, want: "abc123"},
		{name: "unknown keys ignored", blob: `{"v":1,"container_id":"abc123","x":2}`, want: "abc123"},
		{name: "empty", blob: ``, wantErr: true},
		{name: "not json", blob: `abc123`, wantErr: true},
		{name: "no version", blob: `{"container_id":"abc123"}`, wantErr: true},
		{name: "future version", blob: `{"v":2,"container_id":"abc123"}`, wantErr: true},
		{name: "no container id", blob: `{"v":1}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, err := decodeBlob([]byte(tt.blob))
			if tt.wantErr {
				if !errors.Is(err, ErrBadHandle) {
					t.Fatalf("decodeBlob(%s) error = %v, want ErrBadHandle", tt.blob, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeBlob(%s) = %v", tt.blob, err)
			}
			if rec.ContainerID != tt.want {
				t.Errorf("container id = %q, want %q", rec.ContainerID, tt.want)
			}
		})
	}
}
