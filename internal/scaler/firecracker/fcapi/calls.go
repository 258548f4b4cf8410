package fcapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Describe returns the instance information (GET /).
func (c *Client) Describe(ctx context.Context) (InstanceInfo, error) {
	var info InstanceInfo
	err := c.do(ctx, http.MethodGet, "/", nil, &info)
	return info, err
}

// Ping checks that the API answers GET /.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Describe(ctx)
	return err
}

// PutMachineConfig sets vCPUs and memory (PUT /machine-config, pre-boot).
func (c *Client) PutMachineConfig(ctx context.Context, mc MachineConfig) error {
	return c.do(ctx, http.MethodPut, "/machine-config", mc, nil)
}

// PutBootSource sets the kernel and its command line (PUT /boot-source,
// pre-boot).
func (c *Client) PutBootSource(ctx context.Context, bs BootSource) error {
	return c.do(ctx, http.MethodPut, "/boot-source", bs, nil)
}

// PutDrive adds or replaces drive d.DriveID (PUT /drives/{id}, pre-boot).
func (c *Client) PutDrive(ctx context.Context, d Drive) error {
	if d.DriveID == "" {
		return fmt.Errorf("firecracker api PUT /drives: empty drive_id")
	}
	return c.do(ctx, http.MethodPut, "/drives/"+url.PathEscape(d.DriveID), d, nil)
}

// PutNetworkInterface adds interface n.IfaceID (PUT
// /network-interfaces/{id}, pre-boot).
func (c *Client) PutNetworkInterface(ctx context.Context, n NetworkInterface) error {
	if n.IfaceID == "" {
		return fmt.Errorf("firecracker api PUT /network-interfaces: empty iface_id")
	}
	return c.do(ctx, http.MethodPut, "/network-interfaces/"+url.PathEscape(n.IfaceID), n, nil)
}

// PutMMDSConfig configures the metadata service (PUT /mmds/config,
// pre-boot, after the interfaces it names).
func (c *Client) PutMMDSConfig(ctx context.Context, mc MMDSConfig) error {
	return c.do(ctx, http.MethodPut, "/mmds/config", mc, nil)
}

// PutMMDS replaces the MMDS data store with data, any value that marshals
// to a JSON object (PUT /mmds, before or after boot).
func (c *Client) PutMMDS(ctx context.Context, data any) error {
	return c.do(ctx, http.MethodPut, "/mmds", data, nil)
}

// PatchMMDS merges patch into the MMDS data store as an RFC 7396 JSON merge
// patch (PATCH /mmds); a null member deletes a key.
func (c *Client) PatchMMDS(ctx context.Context, patch any) error {
	return c.do(ctx, http.MethodPatch, "/mmds", patch, nil)
}

// GetMMDS decodes the MMDS data store into v (GET /mmds).
func (c *Client) GetMMDS(ctx context.Context, v any) error {
	return c.do(ctx, http.MethodGet, "/mmds", nil, v)
}

// Action runs an action (PUT /actions).
func (c *Client) Action(ctx context.Context, action ActionType) error {
	return c.do(ctx, http.MethodPut, "/actions", actionBody{ActionType: action}, nil)
}

// PatchVM pauses or resumes the VM (PATCH /vm, post-boot).
func (c *Client) PatchVM(ctx context.Context, state VMState) error {
	return c.do(ctx, http.MethodPatch, "/vm", vmBody{State: state}, nil)
}

// CreateSnapshot writes a snapshot of the paused VM (PUT /snapshot/create).
func (c *Client) CreateSnapshot(ctx context.Context, sc SnapshotCreate) error {
	return c.do(ctx, http.MethodPut, "/snapshot/create", sc, nil)
}

// LoadSnapshot restores a snapshot into a fresh VMM (PUT /snapshot/load).
// Firecracker ends the process when a load fails past its checks.
func (c *Client) LoadSnapshot(ctx context.Context, sl SnapshotLoad) error {
	return c.do(ctx, http.MethodPut, "/snapshot/load", sl, nil)
}
