package logs_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/logs"
)

func TestSubscriberOverflow(t *testing.T) {
	t.Parallel()
	st := newStore(t, "") // SubscriberBuffer 64
	slow, cancelSlow := st.Subscribe("run")
	defer cancelSlow()
	fast, cancelFast := st.Subscribe("run")
	defer cancelFast()
	other, cancelOther := st.Subscribe("other-run")

	const published = 100
	var got []int
	for i := range published {
		// Publish never blocks, whatever the slow subscriber does.
		st.Publish(logs.Event{RunID: "run", Kind: logs.EventStatus, Data: json.RawMessage(`{"n":` + itoa(i) + `}`)})
		ev := <-fast
		var p struct{ N int }
		if err := json.Unmarshal(ev.Data, &p); err != nil {
			t.Fatalf("decode %s: %v", ev.Data, err)
		}
		got = append(got, p.N)
	}
	if len(got) != published || got[published-1] != published-1 {
		t.Errorf("fast subscriber: got %d events ending with %v, want %d", len(got), got[len(got)-1:], published)
	}

	var kinds []logs.EventKind
	for ev := range slow {
		kinds = append(kinds, ev.Kind)
	}
	want := make([]logs.EventKind, 64, 65)
	for i := range want {
		want[i] = logs.EventStatus
	}
	want = append(want, logs.EventLagged)
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("slow subscriber's events (-want +got):\n%s", diff)
	}
	if got := st.Stats().SubscribersLagged; got != 1 {
		t.Errorf("got %d lagged subscribers, want 1", got)
	}
	cancelSlow() // after the drop: harmless

	select {
	case ev := <-other:
		t.Errorf("other run's subscriber got %+v, want nothing", ev)
	default:
	}
	cancelOther()
	cancelOther()
	if _, ok := <-other; ok {
		t.Errorf("got an open channel after cancel, want it closed")
	}
}

func TestAppendPublishesLines(t *testing.T) {
	t.Parallel()
	st := newStore(t, "")
	ctx := t.Context()
	events, cancel := st.Subscribe("r")
	defer cancel()
	key := logs.StepKey{RunID: "r", JobID: "j", Step: 1, Attempt: 2}
	lines := mkLines("x", 3)
	mustAppend(t, st, key, 1, mkLines("first", 1))
	mustAppend(t, st, key, 2, lines)
	if ok, _ := st.Append(ctx, key, 2, lines); ok {
		t.Fatalf("replayed chunk: got stored, want skipped")
	}

	first := <-events
	ev := <-events
	want := logs.Event{RunID: "r", Kind: logs.EventLog, Log: &logs.LogEvent{
		JobID: "j", Step: 1, Attempt: 2, Seq: 2, Cursor: first.Log.Next, Next: ev.Log.Next, Lines: lines,
	}}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("log event (-want +got):\n%s", diff)
	}
	select {
	case ev := <-events:
		t.Errorf("got event %+v for a skipped replay, want none", ev)
	default:
	}
	// The event's cursors are the ones Read uses.
	got, next, err := st.Read(ctx, key, ev.Log.Cursor, 0)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if diff := cmp.Diff(stored(2, 2, lines), got); diff != "" {
		t.Errorf("read from the event's cursor (-want +got):\n%s", diff)
	}
	if next != ev.Log.Next {
		t.Errorf("got next %d, want the event's %d", next, ev.Log.Next)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
