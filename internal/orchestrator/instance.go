package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/leader"
	"github.com/kici-dev/kici/internal/store"
)

// instanceTTLFactor is how many heartbeat intervals an instance row stays
// live without a heartbeat: a few missed beats (a slow database, a paused
// VM) do not let a second orchestrator in.
const instanceTTLFactor = 5

// instanceTTL is how long the instance row stays live after a heartbeat.
func (c *Config) instanceTTL() time.Duration {
	return instanceTTLFactor * c.instanceHeartbeat()
}

func (c *Config) instanceHeartbeat() time.Duration {
	if c.InstanceHeartbeat > 0 {
		return c.InstanceHeartbeat
	}
	return DefaultInstanceHeartbeat
}

// describe names this process in the lock file (and, on PostgreSQL, in
// the instance table), right after it took the data dir lock, so that a
// second orchestrator refused meanwhile names this one.
func (s *Server) describe() error {
	host, _ := os.Hostname() // only for people reading the lock file
	role := store.InstanceStandalone
	if s.cfg.ClusterRole == RoleCoordinator {
		role = store.InstanceCoordinator
	}
	s.self = store.Instance{
		ID: uuid.NewString(), Role: role,
		Hostname: host, PID: os.Getpid(), Addr: s.cfg.HTTPAddr, PublicURL: s.cfg.PublicURL,
	}
	return s.lock.record(lockHolder{
		InstanceID: s.self.ID, PID: s.self.PID, Hostname: host, Addr: s.cfg.HTTPAddr, StartedAt: time.Now().UTC(),
	})
}

// claim makes this process the database's orchestrator, before anything
// reads or changes state another live orchestrator may own. SQLite lives
// in the data dir, so its lock (held since New) is the whole claim. On
// PostgreSQL, which other hosts may share, the instance is registered,
// refusing to start beside a live standalone one (and, as a standalone
// one, beside any live one).
func (s *Server) claim(ctx context.Context) error {
	if s.cfg.DatabaseURL == "" {
		return nil
	}
	// The previous holder of this data dir's lock is gone (this process
	// holds its lock now), so its row, if any, need not expire first.
	if _, err := s.db.RegisterInstance(ctx, s.self, s.cfg.instanceTTL(), s.lock.previous.InstanceID); err != nil {
		return err
	}
	s.registered = true
	return nil
}

// keepInstance heartbeats the instance row until ctx ends. When the row is
// gone (this process could not reach the database for longer than the
// TTL, and a starting orchestrator removed it), it registers again; if
// another orchestrator holds the database by then, it returns that error
// and the server stops.
func (s *Server) keepInstance(ctx context.Context) error {
	ttl := s.cfg.instanceTTL()
	t := time.NewTicker(s.cfg.instanceHeartbeat())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := s.db.HeartbeatInstance(ctx, s.self.ID, ttl)
		if errors.Is(err, store.ErrNotFound) {
			s.log.Warn("instance registration lost; registering again", "instance_id", s.self.ID)
			_, err = s.db.RegisterInstance(ctx, s.self, ttl, "")
			var conflict *store.InstanceConflictError
			if errors.As(err, &conflict) {
				return fmt.Errorf("another orchestrator started on the database while this one could not reach it: %w", err)
			}
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("instance heartbeat failed", "instance_id", s.self.ID, "error", err)
		}
	}
}

// release gives up what New claimed and opened, once: the instance row,
// the database, then the data dir lock (last, so that the next
// orchestrator finds the database closed).
func (s *Server) release() error {
	s.releaseOnce.Do(func() {
		if s.pipe != nil {
			s.pipe.Close() // the sources' git processes
		}
		if s.registered {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.db.DeregisterInstance(ctx, s.self.ID); err != nil {
				s.log.Warn("deregister instance", "instance_id", s.self.ID, "error", err)
			}
			cancel()
		}
		s.audit.Close() // nil-safe; writes the queued entries
		if s.db != nil {
			s.releaseErr = s.db.Close()
		}
		s.lock.release()
	})
	return s.releaseErr
}

// ListPeers answers GET /api/v1/peers. Standalone on SQLite, the list is
// this process alone; on PostgreSQL it is the instance table (a row is
// connected while its heartbeat is current) with the leader lease's
// holder as leader (a standalone orchestrator leads itself).
func (s *Server) ListPeers(ctx context.Context) (apiv1.PeerList, error) {
	out := apiv1.PeerList{Self: s.self.ID}
	if s.cfg.DatabaseURL == "" {
		out.Leader = s.self.ID
		out.Peers = []apiv1.Peer{{ID: s.self.ID, Role: s.self.Role, Address: s.cfg.PublicURL, Connected: true, LastSeen: time.Now().UTC()}}
		return out, nil
	}
	insts, err := s.db.ListInstances(ctx)
	if err != nil {
		return apiv1.PeerList{}, err
	}
	now := time.Now()
	for _, i := range insts {
		addr := i.PublicURL
		if i.Role == store.InstanceWorker {
			addr = i.Addr // a worker has no public URL: where a coordinator last heard it from
		}
		out.Peers = append(out.Peers, apiv1.Peer{ID: i.ID, Role: i.Role, Address: addr,
			Connected: i.ExpiresAt.After(now), LastSeen: i.HeartbeatAt.UTC()})
	}
	switch {
	case s.cfg.ClusterRole != RoleCoordinator:
		out.Leader = s.self.ID
	default:
		l, err := s.db.GetLease(ctx, leader.LeaseName)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return apiv1.PeerList{}, err
		case l.Expires.After(l.Now):
			out.Leader = l.Holder
		}
	}
	return out, nil
}

// peerForgetQuiet is how long a peer must have been silent before it may
// be forgotten.
const peerForgetQuiet = 30 * time.Second

// ForgetPeer drops the row of a departed coordinator (DELETE
// /api/v1/peers/{id}). This process, a live one and one heard from in the
// last 30 s are refused; a standalone orchestrator on SQLite knows no
// other peer.
func (s *Server) ForgetPeer(ctx context.Context, id string) error {
	if id == s.self.ID {
		return fmt.Errorf("it is the orchestrator answering: %w", store.ErrPeerRecent)
	}
	if s.cfg.DatabaseURL == "" {
		return fmt.Errorf("peer %q: %w", id, store.ErrNotFound)
	}
	return s.db.ForgetInstance(ctx, id, peerForgetQuiet)
}
