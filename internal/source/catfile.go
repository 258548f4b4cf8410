package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// catFileIdle is how long an unused cat-file process is kept.
const catFileIdle = time.Minute

// catFile is a long-lived `git cat-file --batch` on one repository: the
// object reads of a trigger (resolve a ref, read the workflow trees and
// blobs) cost no fork. Names go to git on its standard input, one a line,
// so none can be taken as an option; a name holding a newline is refused.
//
// It serves one request at a time. The process starts on the first
// request, and is killed when it has been idle for catFileIdle, on close,
// when a request's ctx ends before the answer was read, and when its
// output is not what was asked for (then the next request starts a new
// one). A request never reuses a stream a previous one left half read.
//
// Objects are immutable, so what an old process answers for an object
// name is right. Ref names are read from the repository's files at each
// lookup; still, an answer of "missing" is asked again of a new process
// before it is believed, so a repository replaced under the same path is
// not taken for an empty one.
type catFile struct {
	dir     string
	timeout time.Duration // bounds one request
	idle    time.Duration
	redact  func(string) string

	mu       sync.Mutex
	p        *catProc // nil when none runs
	lastUsed time.Time
	timer    *time.Timer // kills an idle process
	// afterWrite, when set (by tests), runs once a request is written.
	afterWrite func()
}

// catProc is one running git cat-file --batch.
type catProc struct {
	cmd    *exec.Cmd
	kill   context.CancelFunc // interrupts the process group
	in     *os.File
	outF   *os.File
	out    *bufio.Reader
	stderr *syncBuffer
	exited chan struct{} // closed once git has exited
}

// catRequest asks for one object. Objects up to max bytes are read (and
// kept when keep is set); a bigger one ends the batch with an
// *objectTooLargeError.
type catRequest struct {
	name string
	max  int64
	keep bool
}

// catObject is git's answer for one request.
type catObject struct {
	missing bool
	oid     string
	typ     string
	size    int64
	data    []byte // when kept
}

// objectTooLargeError is an object over the size a request allowed. Its
// header was read: oid, type and size are known.
type objectTooLargeError struct {
	name string
	obj  catObject
	max  int64
}

func (e *objectTooLargeError) Error() string {
	return fmt.Sprintf("%s: %s of %d bytes, over the limit of %d", e.name, e.obj.typ, e.obj.size, e.max)
}

// errCatGone means the process was found dead before it answered a
// byte: the request may be sent again to a new one.
var errCatGone = errors.New("git cat-file exited")

// get asks for every request in order, in one exchange with the process.
func (c *catFile) get(ctx context.Context, reqs []catRequest) ([]catObject, error) {
	var buf bytes.Buffer
	for _, r := range reqs {
		if r.name == "" || strings.ContainsAny(r.name, "\n\r\x00") {
			return nil, fmt.Errorf("%w: object name %q is empty or holds a newline", ErrInvalidRef, r.name)
		}
		buf.WriteString(r.name)
		buf.WriteByte('\n')
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 0; ; attempt++ {
		objs, err := c.exchange(ctx, buf.Bytes(), reqs)
		if errors.Is(err, errCatGone) && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return objs, err
	}
}

// exchange sends one request to the process, starting it if none runs.
// c.mu is held.
func (c *catFile) exchange(ctx context.Context, in []byte, reqs []catRequest) ([]catObject, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", context.Cause(ctx))
	}
	if c.p != nil {
		select {
		case <-c.p.exited:
			c.stopLocked()
		default:
		}
	}
	if c.p == nil {
		p, err := c.start()
		if err != nil {
			return nil, err
		}
		c.p = p
	}
	p := c.p
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, p.kill)
	objs, err := p.exchange(in, reqs, c.afterWrite)
	if !stop() {
		// ctx ended: the process is being killed, whatever it said.
		c.stopLocked()
		return nil, c.wrap(p, fmt.Errorf("%w", context.Cause(ctx)))
	}
	var tooLarge *objectTooLargeError
	if err != nil {
		// The rest of the stream is unread or unknown.
		c.stopLocked()
		if errors.As(err, &tooLarge) {
			return objs, err
		}
		return nil, c.wrap(p, err)
	}
	c.lastUsed = time.Now()
	if c.timer == nil {
		c.timer = time.AfterFunc(c.idle, c.idleCheck)
	} else {
		c.timer.Reset(c.idle)
	}
	return objs, nil
}

// wrap names the command in err, with what git wrote on stderr.
func (c *catFile) wrap(p *catProc, err error) error {
	msg := ""
	if p != nil {
		<-p.exited // stopLocked killed it: its stderr is complete
		msg = strings.TrimSpace(p.stderr.String())
	}
	return &gitError{args: []string{"cat-file", "--batch"}, code: -1, stderr: msg, err: err, redact: c.redact}
}

// idleCheck kills the process when no request came for c.idle.
func (c *catFile) idleCheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil {
		return
	}
	if left := c.idle - time.Since(c.lastUsed); left > 0 {
		c.timer.Reset(left)
		return
	}
	c.stopLocked()
}

// restart kills the process, if one runs; the next request starts a new
// one.
func (c *catFile) restart() {
	c.mu.Lock()
	c.stopLocked()
	c.mu.Unlock()
}

// close kills the process and waits for it to exit. A later request
// starts a new one.
func (c *catFile) close() {
	c.mu.Lock()
	p := c.p
	c.stopLocked()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	if p != nil {
		<-p.exited
	}
}

// stopLocked kills the process and forgets it. c.mu is held.
func (c *catFile) stopLocked() {
	if c.p == nil {
		return
	}
	c.p.kill()
	_ = c.p.in.Close()
	_ = c.p.outF.Close()
	c.p = nil
}

// start runs git cat-file --batch with the environment and configuration
// of every other git command.
func (c *catFile) start() (*catProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	life, kill := context.WithCancel(context.Background())
	args := append(append(append([]string(nil), gitConfig...), "-C", c.dir), "cat-file", "--batch")
	cmd := exec.CommandContext(life, "git", args...)
	cmd.Env = gitEnv()
	cmd.Stdin = inR
	cmd.Stdout = outW
	p := &catProc{cmd: cmd, kill: kill, in: inW, outF: outR, out: bufio.NewReaderSize(outR, 64<<10),
		stderr: &syncBuffer{limit: maxStderr}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = killGrace
	setProcessGroup(cmd)
	err = cmd.Start()
	_ = inR.Close()  // git has its own copies
	_ = outW.Close() // so reads end when git exits
	if err != nil {
		kill()
		_ = inW.Close()
		_ = outR.Close()
		return nil, c.wrap(nil, err)
	}
	go func() {
		_ = cmd.Wait()
		if life.Err() != nil {
			killGroup(cmd)
		}
		kill()
		close(p.exited)
	}()
	return p, nil
}

// exchange writes the request and reads one answer per name.
func (p *catProc) exchange(in []byte, reqs []catRequest, afterWrite func()) ([]catObject, error) {
	// Write beside the reads: git answers while it reads, and a large
	// request must not wait on a full pipe.
	werr := make(chan error, 1)
	go func() {
		_, err := p.in.Write(in)
		werr <- err
	}()
	if afterWrite != nil {
		if err := <-werr; err != nil {
			return nil, errCatGone
		}
		werr <- nil
		afterWrite()
	}
	objs, err := p.read(reqs)
	if err != nil {
		p.kill() // so the writer, if stuck, returns
		if e := <-werr; e != nil && len(objs) == 0 && !errors.As(err, new(*objectTooLargeError)) {
			return nil, errCatGone
		}
		return objs, err
	}
	if err := <-werr; err != nil {
		return nil, fmt.Errorf("write request: %w", err)
	}
	return objs, nil
}

// read reads the answers to reqs.
func (p *catProc) read(reqs []catRequest) ([]catObject, error) {
	objs := make([]catObject, 0, len(reqs))
	for i, r := range reqs {
		line, err := p.out.ReadSlice('\n')
		if err != nil {
			if i == 0 && len(line) == 0 && errors.Is(err, io.EOF) {
				return nil, errCatGone
			}
			return objs, fmt.Errorf("read the answer for %q: %w", r.name, err)
		}
		head := string(line[:len(line)-1])
		if head == r.name+" missing" || head == r.name+" ambiguous" {
			objs = append(objs, catObject{missing: true})
			continue
		}
		f := strings.Split(head, " ")
		if len(f) != 3 || !isFullSHA(f[0]) {
			return objs, fmt.Errorf("unexpected answer %q for %q", head, r.name)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return objs, fmt.Errorf("unexpected answer %q for %q", head, r.name)
		}
		o := catObject{oid: strings.ToLower(f[0]), typ: f[1], size: size}
		if size > r.max {
			return objs, &objectTooLargeError{name: r.name, obj: o, max: r.max}
		}
		if r.keep {
			data := make([]byte, size+1)
			if _, err := io.ReadFull(p.out, data); err != nil {
				return objs, fmt.Errorf("read %q: %w", r.name, err)
			}
			if data[size] != '\n' {
				return objs, fmt.Errorf("read %q: no newline after the content", r.name)
			}
			o.data = data[:size]
		} else if _, err := p.out.Discard(int(size) + 1); err != nil {
			return objs, fmt.Errorf("read %q: %w", r.name, err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// syncBuffer is a limitedBuffer that may be read while git writes it.
type syncBuffer struct {
	mu    sync.Mutex
	buf   limitedBuffer
	limit int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.limit = b.limit
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
