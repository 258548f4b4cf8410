// Command guestprobe is the guest agent of fakevm's end-to-end tests. It
// does what a guest's agent does first: it reads its configuration from
// MMDS version 2 over the guest's network (and checks that MMDS refuses a
// GET without a session token), then connects to the address the test put
// in MMDS ("report-to", on the host bridge's gateway) and sends a JSON
// report of what it read and of its environment. Then, as MMDS "mode" says:
// "stay" waits until the test closes the connection, "exit" exits once the
// test sends a line (the VM powers off), "term" waits for SIGTERM, writes
// "sigterm" and exits.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// report is what the probe sends to the test.
type report struct {
	Meta          map[string]any    `json:"meta"`
	NoTokenStatus int               `json:"no_token_status"`
	Env           map[string]string `json:"env"`
	Cwd           string            `json:"cwd"`
	PID           int               `json:"pid"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "guestprobe:", err)
		os.Exit(1)
	}
}

func run() error {
	// Catch SIGTERM before the report is out: the test may send it as soon
	// as it has read the report.
	sigterm := make(chan os.Signal, 1)
	signal.Notify(sigterm, syscall.SIGTERM)
	base := os.Getenv("KICI_AGENT_MMDS_URL")
	if base == "" {
		return fmt.Errorf("KICI_AGENT_MMDS_URL is not set")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var meta map[string]any
	var noToken int
	// Retry until the orchestrator's data is there (404 before it is).
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		meta, noToken, err = readMMDS(client, base)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep := report{Meta: meta, NoTokenStatus: noToken, Env: map[string]string{}, PID: os.Getpid()}
	for _, k := range []string{"KICI_AGENT_MMDS_URL", "KICI_AGENT_WORKDIR", "TMPDIR", "HOME", "PATH"} {
		rep.Env[k] = os.Getenv(k)
	}
	rep.Cwd, _ = os.Getwd()
	to, _ := meta["report-to"].(string)
	conn, err := net.DialTimeout("tcp4", to, 10*time.Second)
	if err != nil {
		return fmt.Errorf("dial the test at %q: %w", to, err)
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(rep); err != nil {
		return fmt.Errorf("send the report: %w", err)
	}
	switch meta["mode"] {
	case "exit":
		_, err := bufio.NewReader(conn).ReadString('\n')
		return err
	case "term":
		<-sigterm
		if _, err := io.WriteString(conn, "sigterm\n"); err != nil {
			return err
		}
		// Power-off takes the guest's link down at once: give the line
		// time to reach the test (it is acknowledged when the test closes
		// or within 2 s) rather than lose it with the link.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.Copy(io.Discard, conn)
		return nil
	default:
		signal.Reset(syscall.SIGTERM)
		_, _ = io.Copy(io.Discard, conn)
		return nil
	}
}

// readMMDS reads latest/meta-data with a V2 session, after checking that a
// GET without a token is refused.
func readMMDS(c *http.Client, base string) (map[string]any, int, error) {
	resp, err := c.Get(base + "/latest/meta-data")
	if err != nil {
		return nil, 0, err
	}
	resp.Body.Close()
	noToken := resp.StatusCode
	req, _ := http.NewRequest(http.MethodPut, base+"/latest/api/token", nil)
	req.Header.Set("X-metadata-token-ttl-seconds", "60")
	resp, err = c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("token: %s", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/latest/meta-data", nil)
	req.Header.Set("X-metadata-token", strings.TrimSpace(string(tok)))
	req.Header.Set("Accept", "application/json")
	resp, err = c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("meta-data: %s", resp.Status)
	}
	var meta map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil {
		return nil, 0, err
	}
	return meta, noToken, nil
}
