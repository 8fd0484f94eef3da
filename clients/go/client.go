// The connection: dialing, the FIFO of requests, the writer and the one reader goroutine.
// SPDX-License-Identifier: MIT

package dlock

import (
	"bufio"
	"context"
	"net"
	"os"
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
// A Client is safe for use by many goroutines: their requests share the
// connection, written in order and answered in order. A request that may
// wait (a Lock that found the lock taken, a Try… with a wait) holds back
// the client's later requests until it is granted, times out or is
// cancelled, because dlockd serves one request of a connection at a time;
// give independent waiters clients of their own.
type Client struct {
	path string
	conn *net.UnixConn

	mu        sync.Mutex
	wcond     *sync.Cond // the writer waits on it for out
	closed    bool
	out       []byte  // request lines not yet written
	inflight  []*call // written, in the order their replies come
	queued    []*call // held back behind the waiting request
	blocking  *call   // the request in flight that may wait, or nil
	holders   map[string][]*hold
	gates     map[string]*gate
	observers map[string]*observed

	closeOnce  sync.Once
	readerDone chan struct{}
}

// call is one request and, once done is closed, its reply.
type call struct {
	line     string
	waits    bool // may wait: nothing is sent behind it until it is answered
	done     chan struct{}
	sent     bool
	answered bool
	cancel   bool     // CANCEL was written for it
	reply    string   // the reply line
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
		holders:    make(map[string][]*hold),
		gates:      make(map[string]*gate),
		observers:  make(map[string]*observed),
		readerDone: make(chan struct{}),
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
	waiting := !c.closed && c.blocking != nil && !c.blocking.cancel
	c.mu.Unlock()
	c.fail(&Error{Code: "CLOSED", Text: "client closed"})
	c.closeOnce.Do(func() {
		if waiting { // dlockd reads nothing else while a request waits
			_, _ = c.conn.Write([]byte("CANCEL\n"))
		}
		_ = c.conn.CloseWrite() // dlockd answers what it read, then closes
		t := time.NewTimer(closeWait)
		select {
		case <-c.readerDone:
		case <-t.C:
		}
		t.Stop()
		_ = c.conn.Close()
		<-c.readerDone
	})
	return nil
}

// fail closes the client: pending calls get err, handles are lost
// ("closed"), local waiters wake with err. Only the first call acts.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	calls := append(c.inflight, c.queued...)
	c.inflight, c.queued, c.blocking = nil, nil, nil
	for _, cl := range calls {
		cl.err, cl.answered = err, true
	}
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
	c.mu.Unlock()
	for _, cl := range calls {
		close(cl.done)
	}
}

// enqueueLocked sends cl now, or queues it behind a waiting request.
func (c *Client) enqueueLocked(cl *call) {
	if c.blocking != nil || len(c.queued) > 0 {
		c.queued = append(c.queued, cl)
		return
	}
	c.sendLocked(cl)
}

func (c *Client) sendLocked(cl *call) {
	cl.sent = true
	c.inflight = append(c.inflight, cl)
	if len(c.out) == 0 {
		c.wcond.Signal()
	}
	c.out = append(c.out, cl.line...)
	c.out = append(c.out, '\n')
	if cl.waits {
		c.blocking = cl
	}
}

func (c *Client) writeLoop() {
	var buf []byte
	for {
		c.mu.Lock()
		for len(c.out) == 0 && !c.closed {
			c.wcond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		buf, c.out = c.out, buf[:0]
		c.mu.Unlock()
		if _, err := c.conn.Write(buf); err != nil {
			c.fail(closedError(err))
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
		case strings.HasPrefix(line, "OK LIST "):
			// A counted reply: exactly n "= …" lines follow, no event between.
			n, _, ok := listHeader(line)
			if !ok {
				c.fail(protoError("bad LIST header: " + line))
				return
			}
			lines := make([]string, 0, n)
			for len(lines) < n {
				l, err := r.ReadString('\n')
				if err != nil {
					c.fail(closedError(err))
					return
				}
				l = strings.TrimRight(l, "\r\n")
				if !strings.HasPrefix(l, "= ") {
					c.fail(protoError("LIST entry expected: " + l))
					return
				}
				lines = append(lines, l)
			}
			c.reply(line, lines)
		default:
			c.reply(line, nil)
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

func (c *Client) reply(line string, lines []string) {
	c.mu.Lock()
	if len(c.inflight) == 0 {
		closed := c.closed
		c.mu.Unlock()
		if !closed {
			c.fail(protoError("reply with no request: " + line))
		}
		return
	}
	cl := c.inflight[0]
	c.inflight[0] = nil
	c.inflight = c.inflight[1:]
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
	if cl == c.blocking {
		c.blocking = nil
		for len(c.queued) > 0 && c.blocking == nil {
			next := c.queued[0]
			c.queued[0] = nil
			c.queued = c.queued[1:]
			c.sendLocked(next)
		}
	}
	c.mu.Unlock()
	close(cl.done)
}

// do sends cl and waits for its reply. When ctx ends first, a request
// still queued is dropped and one waiting on the wire is withdrawn with
// CANCEL; a grant that came anyway is released; the error is then
// ErrCancelled (wrapping ctx.Err()). Otherwise the reply is in cl.reply.
func (c *Client) do(ctx context.Context, cl *call) error {
	if ctx.Err() != nil {
		return cancelError(ctx)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return closedError(nil)
	}
	c.enqueueLocked(cl)
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
	switch {
	case cl.answered:
	case !cl.sent:
		c.removeQueuedLocked(cl)
		c.mu.Unlock()
		return cancelError(ctx)
	case cl == c.blocking && !cl.cancel:
		cl.cancel = true
		c.sendLocked(newCall("CANCEL", false))
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

func (c *Client) removeQueuedLocked(cl *call) {
	for i, q := range c.queued {
		if q == cl {
			c.queued = append(c.queued[:i], c.queued[i+1:]...)
			return
		}
	}
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
