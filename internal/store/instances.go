package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"
)

// The roles an instance registers under. instancesConflict is the one
// place that decides which roles may live together.
const (
	// InstanceStandalone is the role of an orchestrator that must own its
	// database alone: it refuses to start beside any live instance, and no
	// instance starts beside it.
	InstanceStandalone = "standalone"
	// InstanceCoordinator is the role of an orchestrator that shares its
	// database with other coordinators on purpose.
	InstanceCoordinator = "coordinator"
)

// Instance is one orchestrator process registered in the database.
type Instance struct {
	// ID is unique per process start (a random UUID).
	ID string
	// Role is InstanceStandalone or InstanceCoordinator.
	Role string
	// Hostname, PID and Addr name the process for the people reading an
	// error: the host it runs on, its process id and its listen address.
	Hostname string
	PID      int
	Addr     string
	// PublicURL is where other nodes and people reach it (KICI_PUBLIC_URL).
	PublicURL string
	// StartedAt, HeartbeatAt and ExpiresAt are stamped by the store's
	// clock. The instance is live while ExpiresAt is in the future.
	StartedAt   time.Time
	HeartbeatAt time.Time
	ExpiresAt   time.Time
}

// InstanceConflictError is what RegisterInstance returns when a live
// instance holds the database in a way the new one may not share.
type InstanceConflictError struct {
	// Live is the instance that holds the database.
	Live Instance
	// Now is the store's time of the check, to tell the age of the
	// heartbeat.
	Now time.Time
}

func (e *InstanceConflictError) Error() string {
	l := e.Live
	return fmt.Sprintf("database is in use by kici-orchestrator pid %d on host %s, listening on %s, since %s (last heartbeat %s ago)",
		l.PID, l.Hostname, l.Addr, l.StartedAt.UTC().Format(time.RFC3339), e.Now.Sub(l.HeartbeatAt).Round(time.Millisecond))
}

// instancesConflict reports whether an instance of role may not start
// while one of role live is live: a standalone instance shares with no one;
// coordinators share with each other.
func instancesConflict(role, live string) bool {
	return role == InstanceStandalone || live == InstanceStandalone
}

const instanceColumns = "id, role, hostname, pid, addr, public_url, started_at, heartbeat_at, expires_at"

// RegisterInstance records inst as live for ttl, unless a live instance
// conflicts with it (InstanceConflictError, and nothing changes). In the
// same transaction it removes the rows that have expired, and the row of
// the instance whose id is replaces (if not empty): the caller knows that
// one is dead (it holds the lock that instance held). Two instances
// registering at once are serialised (a transaction-scoped advisory lock on
// PostgreSQL, the write lock on SQLite), so at most one of two conflicting
// instances succeeds. It returns inst as stored.
func (db *DB) RegisterInstance(ctx context.Context, inst Instance, ttl time.Duration, replaces string) (Instance, error) {
	if inst.ID == "" || inst.Role == "" {
		return Instance{}, errors.New("register instance: id and role are required")
	}
	if ttl <= 0 {
		return Instance{}, fmt.Errorf("register instance: ttl %s: want more than 0", ttl)
	}
	err := db.Tx(ctx, func(tx *Tx) error {
		if db.d.numbered {
			key, err := tx.instancesLockKey(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.w.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
				return fmt.Errorf("lock instances table: %w", classify(err))
			}
		}
		now := normTime(tx.clock.Now())
		if _, err := tx.exec(ctx, "DELETE FROM orchestrator_instances WHERE expires_at <= ? OR id = ?", timeArg(now), replaces); err != nil {
			return fmt.Errorf("remove expired instances: %w", classify(err))
		}
		live, err := tx.listInstances(ctx)
		if err != nil {
			return err
		}
		for _, l := range live {
			if instancesConflict(inst.Role, l.Role) {
				return &InstanceConflictError{Live: l, Now: now}
			}
		}
		inst.StartedAt, inst.HeartbeatAt, inst.ExpiresAt = now, now, now.Add(ttl)
		_, err = tx.exec(ctx, "INSERT INTO orchestrator_instances ("+instanceColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			inst.ID, inst.Role, inst.Hostname, inst.PID, inst.Addr, inst.PublicURL, timeArg(inst.StartedAt), timeArg(inst.HeartbeatAt), timeArg(inst.ExpiresAt))
		if err != nil {
			return fmt.Errorf("insert instance %q: %w", inst.ID, classify(err))
		}
		return nil
	})
	if err != nil {
		var conflict *InstanceConflictError
		if errors.As(err, &conflict) {
			return Instance{}, err
		}
		return Instance{}, fmt.Errorf("register instance: %w", err)
	}
	return inst, nil
}

// HeartbeatInstance extends the life of instance id to ttl from now. It
// returns ErrNotFound when the row is gone: another instance found it
// expired and removed it, so this one must register again (and may find
// that another one now holds the database).
func (db *DB) HeartbeatInstance(ctx context.Context, id string, ttl time.Duration) error {
	now := normTime(db.clock.Now())
	changed, err := db.execChanged(ctx, "UPDATE orchestrator_instances SET heartbeat_at = ?, expires_at = ? WHERE id = ?",
		timeArg(now), timeArg(now.Add(ttl)), id)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("heartbeat instance %q: %w", id, classify(err))
	}
	return nil
}

// DeregisterInstance removes instance id (on a clean shutdown). Removing
// an instance that is not registered is not an error.
func (db *DB) DeregisterInstance(ctx context.Context, id string) error {
	if _, err := db.exec(ctx, "DELETE FROM orchestrator_instances WHERE id = ?", id); err != nil {
		return fmt.Errorf("deregister instance %q: %w", id, classify(err))
	}
	return nil
}

// ListInstances returns every registered instance, expired ones included,
// oldest first.
func (q *queries) ListInstances(ctx context.Context) ([]Instance, error) {
	return q.listInstances(ctx)
}

func (q *queries) listInstances(ctx context.Context) ([]Instance, error) {
	rows, err := q.w.QueryContext(ctx, "SELECT "+instanceColumns+" FROM orchestrator_instances ORDER BY started_at, id")
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", classify(err))
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		var i Instance
		if err := rows.Scan(&i.ID, &i.Role, &i.Hostname, &i.PID, &i.Addr, &i.PublicURL,
			timeCol{&i.StartedAt}, timeCol{&i.HeartbeatAt}, timeCol{&i.ExpiresAt}); err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// instancesLockKey is the advisory lock id that serialises registrations
// on PostgreSQL, derived from the current schema so that databases in
// different schemas of one server do not wait for each other.
func (q *queries) instancesLockKey(ctx context.Context) (int64, error) {
	var schema sql.NullString
	if err := q.w.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return 0, fmt.Errorf("read current schema: %w", classify(err))
	}
	h := fnv.New64a()
	h.Write([]byte("kici-instances:" + schema.String))
	return int64(h.Sum64()), nil
}

// ErrPeerRecent is returned (wrapped) by ForgetInstance for an instance
// that is live or was heard from too recently to be called departed.
var ErrPeerRecent = errors.New("still live or seen recently")

// ForgetInstance removes the row of a departed instance: one whose row
// has expired and whose last heartbeat is older than quiet, by the
// store's clock. ErrNotFound if there is no such row, ErrPeerRecent
// (with when it was last seen) if it is live or was seen within quiet.
func (db *DB) ForgetInstance(ctx context.Context, id string, quiet time.Duration) error {
	err := db.Tx(ctx, func(tx *Tx) error {
		list, err := tx.listInstances(ctx)
		if err != nil {
			return err
		}
		now := normTime(tx.clock.Now())
		for _, i := range list {
			if i.ID != id {
				continue
			}
			if i.ExpiresAt.After(now) || now.Sub(i.HeartbeatAt) < quiet {
				return fmt.Errorf("instance %q was last seen %s ago (forget needs it gone for %s): %w",
					id, now.Sub(i.HeartbeatAt).Round(time.Second), quiet, ErrPeerRecent)
			}
			if i.Role == InstanceWorker {
				holding, err := tx.workerAgentsHoldingJobs(ctx, id)
				if err != nil {
					return err
				}
				if len(holding) > 0 {
					return fmt.Errorf("worker %q spawned agents that still hold jobs (%s): they may come back through it until their recovery window ends; forget it once those jobs end: %w",
						id, strings.Join(holding, ", "), ErrPeerHoldsJobs)
				}
			}
			_, err := tx.exec(ctx, "DELETE FROM orchestrator_instances WHERE id = ?", id)
			return classify(err)
		}
		return fmt.Errorf("instance %q: %w", id, ErrNotFound)
	})
	if err != nil {
		return fmt.Errorf("forget instance: %w", err)
	}
	return nil
}

// ErrPeerHoldsJobs is returned (wrapped) by ForgetInstance for a worker
// whose scaler agents still hold jobs in the dispatch queue.
var ErrPeerHoldsJobs = errors.New("its agents still hold jobs")

// maxWorkerScalerAgents bounds the agent ids kept per worker.
const maxWorkerScalerAgents = 4096

// RecordWorkerScalerAgents keeps the scaler agents a worker's heartbeat
// listed (at most 4096, each a "scaler-" id of at most 128 bytes; others
// are dropped), for ForgetInstance. A row that is not a worker's is left
// alone.
func (db *DB) RecordWorkerScalerAgents(ctx context.Context, id string, agents []string) error {
	keep := make([]string, 0, min(len(agents), maxWorkerScalerAgents))
	for _, a := range agents {
		if len(keep) == maxWorkerScalerAgents {
			break
		}
		if strings.HasPrefix(a, "scaler-") && len(a) <= 128 && !strings.ContainsAny(a, ", ") {
			keep = append(keep, a)
		}
	}
	_, err := db.exec(ctx, "UPDATE orchestrator_instances SET scaler_agents = ? WHERE id = ? AND role = '"+InstanceWorker+"'",
		strings.Join(keep, ","), id)
	if err != nil {
		return fmt.Errorf("record scaler agents of worker %q: %w", id, classify(err))
	}
	return nil
}

// workerAgentsHoldingJobs returns the scaler agents of worker id that a
// dispatch queue row is dispatched to or waits for, sorted.
func (q *queries) workerAgentsHoldingJobs(ctx context.Context, id string) ([]string, error) {
	var list string
	if err := q.w.QueryRowContext(ctx, q.d.rebind("SELECT scaler_agents FROM orchestrator_instances WHERE id = ?"), id).Scan(&list); err != nil {
		return nil, classify(err)
	}
	if list == "" {
		return nil, nil
	}
	bound, err := q.BoundAgents(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range strings.Split(list, ",") {
		if bound[a] {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out, nil
}

// InstanceWorker is the role of a cluster worker, recorded by the
// coordinators it is connected to (a worker has no database of its own).
const InstanceWorker = "worker"

// TouchWorker records that worker id is connected to a coordinator, from
// address addr, on host hostname, and is live for ttl: the coordinators
// holding a channel to it call it at each of its heartbeats, so the
// instance table lists workers with coordinators. An id that belongs to
// an orchestrator is refused (ErrConflict): a worker cannot pose as one.
func (db *DB) TouchWorker(ctx context.Context, id, addr, hostname string, ttl time.Duration) error {
	if id == "" || ttl <= 0 {
		return fmt.Errorf("touch worker %q: id and a positive ttl are required", id)
	}
	now := normTime(db.clock.Now())
	changed, err := db.execChanged(ctx,
		"INSERT INTO orchestrator_instances ("+instanceColumns+") VALUES (?, ?, ?, 0, ?, '', ?, ?, ?)"+
			" ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, addr = excluded.addr,"+
			" heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at"+
			" WHERE orchestrator_instances.role = '"+InstanceWorker+"'",
		id, InstanceWorker, hostname, addr, timeArg(now), timeArg(now), timeArg(now.Add(ttl)))
	if err != nil {
		return fmt.Errorf("touch worker %q: %w", id, classify(err))
	}
	if !changed {
		return fmt.Errorf("touch worker %q: the id belongs to an orchestrator: %w", id, ErrConflict)
	}
	return nil
}

// RevokeNode revokes worker id: every coordinator refuses its certificate
// from now on (NodeRevoked), and its row leaves the instance table. by
// names who revoked it, for the record. Revoking again changes nothing.
// An id that belongs to a live orchestrator is refused (ErrConflict).
func (db *DB) RevokeNode(ctx context.Context, id, by string) error {
	if id == "" {
		return errors.New("revoke node: the id is empty")
	}
	err := db.Tx(ctx, func(tx *Tx) error {
		var role string
		err := tx.w.QueryRowContext(ctx, tx.d.rebind("SELECT role FROM orchestrator_instances WHERE id = ?"), id).Scan(&role)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return classify(err)
		case role != InstanceWorker:
			return fmt.Errorf("%q is a %s, not a worker: %w", id, role, ErrConflict)
		}
		if _, err := tx.exec(ctx, "INSERT INTO cluster_revoked_nodes (node_id, revoked_at, revoked_by) VALUES (?, ?, ?) ON CONFLICT (node_id) DO NOTHING",
			id, timeArg(normTime(tx.clock.Now())), by); err != nil {
			return classify(err)
		}
		_, err = tx.exec(ctx, "DELETE FROM orchestrator_instances WHERE id = ? AND role = '"+InstanceWorker+"'", id)
		return classify(err)
	})
	if err != nil {
		return fmt.Errorf("revoke node %q: %w", id, err)
	}
	return nil
}

// NodeRevoked reports whether worker id was revoked.
func (db *DB) NodeRevoked(ctx context.Context, id string) (bool, error) {
	var one int
	err := db.r.QueryRowContext(ctx, db.d.rebind("SELECT 1 FROM cluster_revoked_nodes WHERE node_id = ?"), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("is node %q revoked: %w", id, classify(err))
	}
	return true, nil
}
