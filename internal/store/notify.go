package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/stdlib"
)

// ErrNoNotify is returned by Notify and Listen on SQLite, which has no
// notifications (and no second orchestrator to tell).
var ErrNoNotify = errors.New("notifications need PostgreSQL")

// MaxNotifyPayload is the largest payload Notify sends: PostgreSQL refuses
// one of 8000 bytes or more.
const MaxNotifyPayload = 7900

// notifyChannel is the PostgreSQL channel of topic for this database:
// channels are shared by every schema of a server, so the name carries a
// hash of the current schema, and databases in different schemas (tests
// run in parallel) never hear each other.
func (db *DB) notifyChannel(ctx context.Context, topic string) (string, error) {
	var schema string
	if err := db.write.QueryRowContext(ctx, "SELECT COALESCE(current_schema(), '')").Scan(&schema); err != nil {
		return "", fmt.Errorf("read current schema: %w", classify(err))
	}
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("kici_%s_%08x", topic, h.Sum32()), nil
}

// Notify sends payload (at most MaxNotifyPayload bytes) to the listeners
// of topic on every connection to this database, once the statement
// commits (at once outside a transaction). Delivery is best effort: a
// listener that is reconnecting misses it.
func (db *DB) Notify(ctx context.Context, topic, payload string) error {
	if !db.d.numbered {
		return ErrNoNotify
	}
	if len(payload) > MaxNotifyPayload {
		return fmt.Errorf("notify %s: payload of %d bytes, at most %d", topic, len(payload), MaxNotifyPayload)
	}
	ch, err := db.notifyChannel(ctx, topic)
	if err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	if _, err := db.write.ExecContext(ctx, "SELECT pg_notify($1, $2)", ch, payload); err != nil {
		return fmt.Errorf("notify %s: %w", topic, classify(err))
	}
	return nil
}

// Listen calls fn with the payload of each notification of topic, in the
// order they were sent, on a connection of its own, until ctx ends (nil)
// or the connection fails (the error; the caller listens again, and the
// notifications sent in between are lost). ready, if not nil, is called
// once the listener is registered: a notification sent after it returns
// is delivered. fn runs on the listening goroutine and must not block for
// long.
func (db *DB) Listen(ctx context.Context, topic string, ready func(), fn func(payload string)) error {
	if !db.d.numbered {
		return ErrNoNotify
	}
	ch, err := db.notifyChannel(ctx, topic)
	if err != nil {
		return fmt.Errorf("listen %s: %w", topic, err)
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("listen %s: %w", topic, err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, `LISTEN "`+ch+`"`); err != nil {
			return err
		}
		// Leave the connection clean for the pool, whatever happens next.
		defer func() { _, _ = pc.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
		if ready != nil {
			ready()
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			fn(n.Payload)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listen %s: %w", topic, classify(err))
}
