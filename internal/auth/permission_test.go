package auth_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/auth"
)

func TestRolePermissions(t *testing.T) {
	t.Parallel()
	all := auth.Permissions
	var adminPerms []auth.Permission
	for _, p := range all {
		if p != auth.TokenManage && p != auth.KeyRotate {
			adminPerms = append(adminPerms, p)
		}
	}
	tests := []struct {
		name string
		role auth.Role
		want []auth.Permission
	}{
		{name: "owner has every permission", role: auth.Owner, want: all},
		{name: "admin has all but token.manage and key.rotate", role: auth.Admin, want: adminPerms},
		{name: "auditor only reads, never secrets", role: auth.Auditor, want: []auth.Permission{
			auth.ContextRead, auth.AuditRead, auth.RunRead, auth.EventLogRead, auth.AccessLogRead,
			auth.EventDLQRead, auth.ScalerRead, auth.TestRunRead,
		}},
		{name: "an unknown role has none", role: auth.Role("root"), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.role.Permissions()); diff != "" {
				t.Errorf("permissions of %q (-want +got):\n%s", tt.role, diff)
			}
			if tt.role.Can("made.up") {
				t.Errorf("role %q: got Can(made.up) true, want false", tt.role)
			}
		})
	}
}

// TestSeedPermissions: the permissions the later reference releases add
// are there, with the grants they specify.
func TestSeedPermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		perm                 auth.Permission
		owner, admin, audito bool
	}{
		{perm: auth.ScalerRead, owner: true, admin: true, audito: true},
		{perm: auth.ScalerManage, owner: true, admin: true, audito: false},
		{perm: auth.PeerManage, owner: true, admin: true, audito: false},
		{perm: auth.TokenManage, owner: true, admin: false, audito: false},
		{perm: auth.KeyRotate, owner: true, admin: false, audito: false},
		{perm: auth.SecretRead, owner: true, admin: true, audito: false},
	}
	for _, tt := range tests {
		t.Run(string(tt.perm), func(t *testing.T) {
			t.Parallel()
			got := [3]bool{auth.Owner.Can(tt.perm), auth.Admin.Can(tt.perm), auth.Auditor.Can(tt.perm)}
			if want := [3]bool{tt.owner, tt.admin, tt.audito}; got != want {
				t.Errorf("owner, admin, auditor: got %v, want %v", got, want)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in      string
		wantErr bool
	}{{"owner", false}, {"admin", false}, {"auditor", false}, {"Owner", true}, {"", true}} {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			_, err := auth.ParseRole(tt.in)
			if (err != nil) != tt.wantErr {
				t.Errorf("ParseRole(%q): got error %v, want error %t", tt.in, err, tt.wantErr)
			}
		})
	}
}
