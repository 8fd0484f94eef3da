// The connection: dialing, tagged requests, the writer and the one reader goroutine that matches replies to them.
// SPDX-License-Identifier: MIT

package dlock

import (
	"bufio"
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultSocket is dlockd's socket when $DLOCK_SOCKET is not set.
const DefaultSocket = "/run/dlockd/dlockd.sock"

// SocketEnv names the environment variable with the default socket path.
const SocketEnv = "DLOCK_SOCKET"

// closeWait bounds how long Close waits for dlockd to end the connection
// (and so release its locks) after the client stopped writing.
const closeWait = 2 * time.Second

// Client is one connection to dlockd, and one lock owner: dlockd counts
// holds per connection, and closing it releases every lock it holds.
// A Client is safe for use by many goroutines, and any number of them may
// wait at once: every request goes out tagged, dlockd serves each as soon
// as it reads it and answers it when it is ready, and the client hands
// each answer to the goroutine that asked. One goroutine's wait (a Lock of
// a taken lock, a Try… with a wait, an Elect) holds back no other's
// request, an Unlock included. Two goroutines asking for one name still
// take turns in the client (see Lock). dlockd serves at most its
// max_inflight (1024 by default) of a connection's requests at once; a
// request past that fails with ErrLimit.
type Client struct {
	path string
	conn *net.UnixConn

	mu        sync.Mutex
	wcond     *sync.Cond // the writer waits on it for out
	closed    bool
	shut      bool             // Close: the writer flushes out, then shuts the writing side
	out       []byte           // request lines not yet written
	seq       uint64           // the last tag's number
	pending   map[string]*call // by tag: requests sent and not yet answered
	holders   map[string][]*hold
	gates     map[string]*gate
	observers map[string]*observed

	closeOnce  sync.Once
	readerDone chan struct{}
	writerDone chan struct{}
}

// call is one request and, once done is closed, its reply.
type call struct {
	line     string
	tag      string // its tag on the wire, without the '#'
	waits    bool   // it may wait in dlockd
	done     chan struct{}
	answered bool
	cancel   bool     // CANCEL #tag was sent for it
	reply    string   // the reply line, without its tag
	lines    []string // a counted reply's lines after reply (LIST)
	err      error    // set instead of reply when the connection failed

	spec    *grantSpec // a grant: the reader makes the handle on OK
	lock    *Lock      // the handle the grant made (new grants)
	permits *Permits   // likewise, for ACQUIRE
	stale   bool       // a reentry's grant that is not its handle's hold

	elect      *electSpec   // an ELECT: the reader makes the *Leadership on OK
	leadership *Leadership  // the handle it made
	obs        *Observation // an OBSERVE: the reader starts it on OK
	multi      *multiSpec   // an MLOCK/TRYMLOCK: the reader makes the *MultiHold on OK
	mhold      *MultiHold   // the handle it made
}

func newCall(line string, waits bool) *call {
	return &call{line: line, waits: waits, done: make(chan struct{})}
}

// Dial connects to dlockd's socket at path. The error of a failed connect
// is a *ConnectError naming the path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, &ConnectError{Path: path, Err: err}
	}
	c := &Client{
		path:       path,
		conn:       conn.(*net.UnixConn),
		pending:    make(map[string]*call),
		holders:    make(map[string][]*hold),
		gates:      make(map[string]*gate),
		observers:  make(map[string]*observed),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.wcond = sync.NewCond(&c.mu)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// DialDefault connects to $DLOCK_SOCKET, or else to DefaultSocket.
func DialDefault(ctx context.Context) (*Client, error) {
	return Dial(ctx, DefaultPath())
}

// DefaultPath is the socket DialDefault uses.
func DefaultPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	return DefaultSocket
}

// Path is the socket the client is connected to.
func (c *Client) Path() string { return c.path }

// Close ends the connection: every lock and permit it holds is released,
// pending calls fail at once with ErrClosed, and every live handle reports
// ReasonClosed. Close waits (briefly) for dlockd to end the connection, so
// the locks are free when it returns. Calling it again does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		// dlockd answers what it read before it closes a connection whose
		// writing side is shut: withdraw every request in progress (a wait
		// would keep it open), then shut it (the writer does, after these).
		for tag, cl := range c.pending {
			if !strings.HasPrefix(cl.line, "CANCEL ") {
				c.writeLineLocked(c.nextTagLocked(), "CANCEL #"+tag)
			}
		}
		c.shut = true
	}
	calls := c.failLocked(&Error{Code: "CLOSED", Text: "client closed"})
	c.mu.Unlock()
	closeCalls(calls)
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		select { // the last lines written and the writing side shut
		case <-c.writerDone:
		case <-ctx.Done():
		}
		select { // dlockd ended the connection: its locks are gone
		case <-c.readerDone:
		case <-ctx.Done():
		}
		cancel()
		_ = c.conn.Close()
		<-c.readerDone
		<-c.writerDone
	})
	return nil
}

// fail closes the client: pending calls get err, handles are lost
// ("closed"), local waiters wake with err. Only the first call acts.
func (c *Client) fail(err error) {
	c.mu.Lock()
	calls := c.failLocked(err)
	c.mu.Unlock()
	closeCalls(calls)
}

// failLocked is fail's work under the mutex; it returns the calls whose
// done the caller closes once it has unlocked.
func (c *Client) failLocked(err error) []*call {
	if c.closed {
		return nil
	}
	c.closed = true
	calls := make([]*call, 0, len(c.pending))
	for _, cl := range c.pending {
		cl.err, cl.answered = err, true
		calls = append(calls, cl)
	}
	c.pending = map[string]*call{}
	for _, hs := range c.holders {
		for _, h := range append([]*hold(nil), hs...) {
			h.endLocked(&LostError{Name: h.name, Reason: ReasonClosed})
		}
	}
	c.holders = map[string][]*hold{}
	for _, ob := range c.observers {
		for _, o := range append([]*Observation(nil), ob.active...) {
			o.endLocked(err)
		}
	}
	c.observers = map[string]*observed{}
	for _, g := range c.gates {
		for _, w := range g.waiters {
			w.err, w.granted = err, true
			close(w.ready)
		}
	}
	c.gates = map[string]*gate{}
	c.wcond.Broadcast()
	return calls
}

func closeCalls(calls []*call) {
	for _, cl := range calls {
		close(cl.done)
	}
}

// failProto fails the client on something dlockd should never say, and
// drops the connection: dlockd then releases what it held.
func (c *Client) failProto(err error) {
	c.fail(err)
	_ = c.conn.Close()
}

// nextTagLocked is the next tag: the connection's counter in base 36,
// skipping any tag still in progress (after the counter wrapped).
func (c *Client) nextTagLocked() string {
	for {
		c.seq++
		tag := strconv.FormatUint(c.seq, 36)
		if c.pending[tag] == nil {
			return tag
		}
	}
}

// sendLocked tags cl, registers it for its reply and queues its line.
func (c *Client) sendLocked(cl *call) {
	cl.tag = c.nextTagLocked()
	c.pending[cl.tag] = cl
	c.writeLineLocked(cl.tag, cl.line)
}

func (c *Client) writeLineLocked(tag, line string) {
	if len(c.out) == 0 {
		c.wcond.Signal()
	}
	c.out = append(c.out, '#')
	c.out = append(c.out, tag...)
	c.out = append(c.out, ' ')
	c.out = append(c.out, line...)
	c.out = append(c.out, '\n')
}

func (c *Client) writeLoop() {
	defer close(c.writerDone)
	var buf []byte
	for {
		// Let the goroutines the last replies woke queue their next
		// requests first: one write then carries them all (a write a
		// request cost more in syscalls than the rest of the client).
		runtime.Gosched()
		c.mu.Lock()
		for len(c.out) == 0 && !c.closed {
			c.wcond.Wait()
		}
		if c.closed && !c.shut {
			c.mu.Unlock()
			return
		}
		last := c.closed // closed by Close: these are the last lines
		buf, c.out = c.out, buf[:0]
		c.mu.Unlock()
		if len(buf) > 0 {
			if _, err := c.conn.Write(buf); err != nil {
				c.fail(closedError(err))
				return
			}
		}
		if last {
			_ = c.conn.CloseWrite() // dlockd answers what it read, then closes
			return
		}
	}
}

func (c *Client) readLoop() {
	defer close(c.readerDone)
	r := bufio.NewReaderSize(c.conn, 8192)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			c.fail(closedError(err))
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
		case line[0] == '!':
			c.event(line)
		case line[0] == '#':
			tag, rest, ok := strings.Cut(line[1:], " ")
			if !ok || tag == "" {
				c.failProto(protoError("bad tagged reply: " + line))
				return
			}
			var lines []string
			if strings.HasPrefix(rest, "OK LIST ") {
				// A counted reply: its first line is tagged, exactly n
				// "= …" lines follow, with nothing between them.
				n, _, ok := listHeader(rest)
				if !ok {
					c.failProto(protoError("bad LIST header: " + line))
					return
				}
				lines = make([]string, 0, n)
				for len(lines) < n {
					l, err := r.ReadString('\n')
					if err != nil {
						c.fail(closedError(err))
						return
					}
					l = strings.TrimRight(l, "\r\n")
					if !strings.HasPrefix(l, "= ") {
						c.failProto(protoError("LIST entry expected: " + l))
						return
					}
					lines = append(lines, l)
				}
			}
			if !c.reply(tag, rest, lines) {
				c.failProto(protoError("reply to no request in progress: " + line))
				return
			}
		default:
			// Every request is tagged, so an untagged reply is dlockd's
			// answer to a malformed tag: the client's bug, which leaves
			// the request it garbled unanswered. Fail loudly.
			c.failProto(protoError("untagged reply (a request's tag was malformed): " + line))
			return
		}
	}
}

// event handles "!LOST <name> <reason>" and "!LEADER <name> …"; other
// events are ignored.
func (c *Client) event(line string) {
	words := strings.SplitN(line[1:], " ", 3)
	if len(words) == 3 && words[0] == "LEADER" {
		c.mu.Lock()
		c.leaderEventLocked(words[1], words[2])
		c.mu.Unlock()
		return
	}
	words = strings.Fields(line[1:])
	if len(words) < 3 || words[0] != "LOST" {
		return
	}
	c.mu.Lock()
	for _, h := range append([]*hold(nil), c.holders[words[1]]...) {
		h.endLocked(&LostError{Name: words[1], Reason: words[2]})
	}
	c.mu.Unlock()
}

// reply hands the reply of the request tagged tag to its call; false if
// no request of that tag is in progress.
func (c *Client) reply(tag, line string, lines []string) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return true
	}
	cl := c.pending[tag]
	if cl == nil {
		c.mu.Unlock()
		return false
	}
	delete(c.pending, tag)
	cl.reply, cl.lines, cl.answered = line, lines, true
	if strings.HasPrefix(line, "OK ") {
		switch {
		case cl.spec != nil:
			c.grantedLocked(cl)
		case cl.elect != nil:
			c.electedLocked(cl)
		case cl.obs != nil:
			c.observedLocked(cl)
		case cl.multi != nil:
			c.multiGrantedLocked(cl)
		}
	}
	c.mu.Unlock()
	close(cl.done)
	return true
}

// do sends cl and waits for its reply. When ctx ends first, the request
// is withdrawn with CANCEL #tag (the other requests in progress go on);
// a grant that came anyway is released; the error is then ErrCancelled
// (wrapping ctx.Err()). Otherwise the reply is in cl.reply.
func (c *Client) do(ctx context.Context, cl *call) error {
	if ctx.Err() != nil {
		return cancelError(ctx)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return closedError(nil)
	}
	c.sendLocked(cl)
	c.mu.Unlock()
	select {
	case <-cl.done:
		if cl.err != nil {
			return cl.err
		}
		if strings.HasPrefix(cl.reply, "ERR CANCELLED") {
			return cancelError(ctx)
		}
		return nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !cl.answered && !cl.cancel && !c.closed {
		// Nobody waits for the CANCEL's own reply: cl's comes first
		// (ERR CANCELLED, or the grant that raced it).
		cl.cancel = true
		c.sendLocked(newCall("CANCEL #"+cl.tag, false))
	}
	c.mu.Unlock()
	<-cl.done
	if cl.err != nil {
		return cl.err
	}
	if strings.HasPrefix(cl.reply, "OK ") {
		c.undo(cl)
	}
	return cancelError(ctx)
}

// undo releases what a granted call got for a caller that gave up.
func (c *Client) undo(cl *call) {
	switch {
	case cl.lock != nil:
		_ = cl.lock.Unlock()
	case cl.leadership != nil:
		_ = cl.leadership.Resign()
	case cl.mhold != nil:
		_ = cl.mhold.Unlock()
	case cl.permits != nil:
		_, _ = cl.permits.Release(cl.permits.Count())
	case cl.spec != nil && cl.spec.reentry != nil && !cl.stale:
		_ = cl.spec.reentry.Unlock()
	case cl.spec != nil && cl.spec.reentry != nil:
		c.rawUnlock(cl.spec.reentry.kind, cl.spec.name)
	}
}

// rawUnlock drops one wire hold that no handle owns.
func (c *Client) rawUnlock(k kind, name string) {
	cl := newCall(verbs[k].unlock+" "+name, false)
	_ = c.do(context.Background(), cl)
}

// simple sends a request that does not wait and returns its OK words.
func (c *Client) simple(ctx context.Context, line string) (string, error) {
	cl := newCall(line, false)
	if err := c.do(ctx, cl); err != nil {
		return "", err
	}
	if strings.HasPrefix(cl.reply, "OK") {
		return strings.TrimPrefix(strings.TrimPrefix(cl.reply, "OK"), " "), nil
	}
	if strings.HasPrefix(cl.reply, "ERR ") {
		return "", replyError(cl.reply)
	}
	return "", protoError("unexpected reply to " + line + ": " + cl.reply)
}

func cancelError(ctx context.Context) error {
	cause := ctx.Err()
	if cause == nil {
		cause = context.Canceled
	}
	return &Error{Code: "CANCELLED", Text: "call cancelled: " + cause.Error(), err: cause}
}
