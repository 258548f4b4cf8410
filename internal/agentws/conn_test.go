package agentws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/protocol"
)

// TestConnHoldsMessagesUntilRegistered: a dispatch the dispatcher sends as
// soon as the agent is registered must reach the agent after the
// registered reply, never before it (the agent would take it for a
// protocol error and drop it).
func TestConnHoldsMessagesUntilRegistered(t *testing.T) {
	sent := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		c := newConn(ws, 5*time.Second)
		early := make(chan error, 1)
		go func() {
			early <- c.Send(context.Background(), &protocol.JobCancel{JobID: "j1", Reason: "sent before the reply"})
		}()
		select {
		case err := <-early:
			t.Errorf("a message went out before the registered reply (err %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := c.Send(context.Background(), &protocol.Registered{AgentID: "a1", HeartbeatIntervalMS: 1000}); err != nil {
			t.Error(err)
		}
		c.open()
		sent <- <-early
		<-r.Context().Done()
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var types []string
	for range 2 {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, err := protocol.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Type())
	}
	if types[0] != protocol.TypeRegistered || types[1] != protocol.TypeJobCancel {
		t.Fatalf("messages in order %v, want [%s %s]", types, protocol.TypeRegistered, protocol.TypeJobCancel)
	}
	if err := <-sent; err != nil {
		t.Fatalf("held message: %v", err)
	}
}

// TestConnGivesUpWhenNeverRegistered: a sender does not wait forever for
// a registration that is never answered.
func TestConnGivesUpWhenNeverRegistered(t *testing.T) {
	c := newConn(nil, 50*time.Millisecond)
	err := c.Send(t.Context(), &protocol.JobCancel{JobID: "j1", Reason: "x"})
	if err == nil {
		t.Fatal("send before registration succeeded, want an error")
	}
}
