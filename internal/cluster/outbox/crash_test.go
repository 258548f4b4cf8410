package outbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashChildEnv, when set, makes TestCrashKeepsCommittedAppends the child:
// its value is the outbox path.
const crashChildEnv = "OUTBOX_CRASH_CHILD"

// crashLine starts each line the child prints after an Append returned.
const crashLine = "committed "

// crashPayload is the payload the child appends under key; the parent
// rebuilds it to check what it reads back. Sizes vary from 8 bytes to a
// few KiB.
func crashPayload(key string, i int) []byte {
	return bytes.Repeat([]byte(key+";"), 1+(i*37)%400)
}

func TestCrashKeepsCommittedAppends(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(t, path)
		return
	}
	t.Parallel()
	const killAfter = 300 // lines
	path := filepath.Join(t.TempDir(), "outbox.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashKeepsCommittedAppends$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = t.Output()
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	type printed struct {
		stream  string
		payload []byte
	}
	committed := map[uint64]printed{}
	var maxSeq uint64
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// EOF, after the kill; a last line without its newline was cut
			// by the kill and does not count.
			if !errors.Is(err, io.EOF) {
				t.Errorf("read child output: %v", err)
			}
			break
		}
		rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), crashLine)
		if !ok {
			continue // the testing package's own output
		}
		var seq uint64
		var stream, key string
		var i int
		if _, err := fmt.Sscan(rest, &seq, &stream, &key, &i); err != nil {
			t.Fatalf("child line %q: %v", line, err)
		}
		if _, dup := committed[seq]; dup {
			t.Fatalf("child printed seq %d twice", seq)
		}
		committed[seq] = printed{stream, crashPayload(key, i)}
		maxSeq = max(maxSeq, seq)
		if len(committed) == killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill child: %v", err)
			}
		}
	}
	err = cmd.Wait()
	if len(committed) < killAfter {
		t.Fatalf("child printed %d lines before it ended (%v), want at least %d", len(committed), err, killAfter)
	}
	if ctx.Err() != nil {
		t.Fatalf("child outlived the test's deadline")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.String() != "signal: killed" {
		t.Fatalf("child ended with %v, want killed", err)
	}

	o := openAt(t, path, Options{})
	entries := all(t, o, "")
	t.Logf("child killed after printing %d seqs (highest %d); the file holds %d entries", len(committed), maxSeq, len(entries))
	found := make(map[uint64]Entry, len(entries))
	for _, e := range entries {
		found[e.Seq] = e
	}
	for seq, want := range committed {
		got, ok := found[seq]
		switch {
		case !ok:
			t.Errorf("seq %d: the child's Append returned it, but it is gone after the crash", seq)
		case got.Stream != want.stream || !bytes.Equal(got.Payload, want.payload):
			t.Errorf("seq %d: got stream %q payload of %d bytes, want %q with %d bytes", seq, got.Stream, len(got.Payload), want.stream, len(want.payload))
		}
	}
	if n, _ := o.Depth(); n != len(entries) {
		t.Errorf("depth after reopen: got %d, want %d", n, len(entries))
	}
	next := mustAppend(t, o, "after", "k", "crash")
	if next <= maxSeq || next <= entries[len(entries)-1].Seq {
		t.Errorf("first seq after the crash: got %d, want above %d and %d", next, maxSeq, entries[len(entries)-1].Seq)
	}
}

// crashChild appends from several goroutines until it is killed (or, if
// the parent is gone, for 30 s), printing each seq once Append returned.
func crashChild(t *testing.T, path string) {
	o, err := Open(path, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			stream := "coord-" + strconv.Itoa(g%3)
			key := "w" + strconv.Itoa(g)
			for i := 0; time.Now().Before(deadline); i++ {
				seq, err := o.Append(t.Context(), stream, "k", crashPayload(key, i))
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				// One write per line, so a kill cannot interleave lines.
				fmt.Fprintf(os.Stdout, "%s%d %s %s %d\n", crashLine, seq, stream, key, i)
			}
		})
	}
	wg.Wait()
	if err := o.Close(); err != nil {
		t.Error(err)
	}
}
