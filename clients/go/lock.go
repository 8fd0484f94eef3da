// Locks: plain, read/write and fair grants, and the *Lock handle.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

type kind int

const (
	kindPlain kind = iota
	kindRead
	kindWrite
	kindFair
	kindSem
)

var verbs = [...]struct{ wait, try, unlock string }{
	kindPlain: {"LOCK", "TRYLOCK", "UNLOCK"},
	kindRead:  {"RLOCK", "TRYRLOCK", "RUNLOCK"},
	kindWrite: {"WLOCK", "TRYWLOCK", "WUNLOCK"},
	kindFair:  {"FAIRLOCK", "TRYFAIRLOCK", "UNLOCK"},
	kindSem:   {"ACQUIRE", "TRYACQUIRE", "RELEASE"},
}

// grantSpec says what a grant request asks for, so that the reader can
// make its handle the moment the grant is read (before any later !LOST).
type grantSpec struct {
	kind    kind
	name    string
	lease   int64 // ms, 0 = watchdog
	permits int   // kindSem
	reentry *Lock // a reentry through this handle
}

// Lock is a held lock: what Lock, TryLock, RLock, WLock, FairLock and
// their Try… forms return. Its methods are safe for concurrent use.
//
//	l, err := c.Lock(ctx, "invoices")
//	if err != nil { ... }
//	defer l.Unlock()
//	work(l.Context(), l.Fence())
type Lock struct {
	hold
	kind  kind
	lease int64
	fence uint64
	holds int // holds taken through this handle
}

// Fence is the grant's fence: pass it to the resource you protect and have
// it refuse fences lower than the highest it saw.
func (l *Lock) Fence() uint64 { return l.fence }

// Holds is how many holds this handle has (reentry adds one, Unlock takes
// one), 0 once released or lost.
func (l *Lock) Holds() int {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.ended {
		return 0
	}
	return l.holds
}

// Unlock drops one hold; the last one releases the lock (and lets the
// client's next goroutine waiting for the name go). It returns the handle's
// *LostError if the lock had been lost, ErrNotHeld if the handle holds
// nothing. It does not wait for other requests than its own, so `defer
// l.Unlock()` is safe.
func (l *Lock) Unlock() error {
	c := l.c
	c.mu.Lock()
	if l.ended {
		err := l.err
		c.mu.Unlock()
		if err == nil {
			err = &Error{Code: "NOTHELD", Text: l.name + " is not held through this handle"}
		}
		return err
	}
	l.holds--
	cl := newCall(verbs[l.kind].unlock+" "+l.name, false)
	c.sendLocked(cl) // before the gate opens: the next holder's LOCK goes after it
	if l.holds == 0 {
		l.endLocked(nil)
	}
	c.mu.Unlock()
	<-cl.done
	if cl.err != nil {
		return cl.err // the connection is gone, and with it the lock
	}
	if strings.HasPrefix(cl.reply, "ERR ") {
		if err := l.Err(); err != nil {
			return err
		}
		return replyError(cl.reply)
	}
	return nil
}

// Relock takes the lock again through its handle (reentry): the same
// fence, one hold more. Use it, not c.Lock, to lock a name a goroutine
// already holds: c.Lock would wait for this handle's release.
func (l *Lock) Relock(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	spec := &grantSpec{kind: l.kind, name: l.name, lease: l.lease, reentry: l}
	cl, err := l.c.grant(ctx, spec, false, time.Time{})
	if err != nil {
		return err
	}
	if cl.stale { // the hold ended before the grant: a fresh lock, not ours
		l.c.rawUnlock(l.kind, l.name)
		if err := l.Err(); err != nil {
			return err
		}
		return &Error{Code: "NOTHELD", Text: l.name + " is not held through this handle"}
	}
	return nil
}

// Renew renews the lease (RENEW): with lease > 0 the lock now ends lease
// from now; with 0 it gets dlockd's default lease (a watchdog lock is
// renewed now). It returns the remaining lease.
func (l *Lock) Renew(ctx context.Context, lease time.Duration) (time.Duration, error) {
	return l.renew(ctx, lease)
}

// Lock takes the plain lock name, waiting as long as it takes (or until
// ctx ends: ErrCancelled, and nothing stays held). Any number of the
// client's goroutines may wait at once, for different names: each is
// granted when its own name is, and its wait holds back no other request
// of the client. Goroutines of one client asking for the same name take
// turns in the client (dlockd would count the second a reentry of the
// first's hold): the second one's request goes out once the first's
// handle has let go.
func (c *Client) Lock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindPlain, name, false, 0, opts)
}

// TryLock takes the plain lock name if it can within wait (0: one try); a
// *TimeoutError (errors.Is ErrTimeout) when it cannot.
func (c *Client) TryLock(ctx context.Context, name string, wait time.Duration, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindPlain, name, true, wait, opts)
}

// RLock takes a read (shared) hold of the read/write lock name. The
// client's goroutines share read holds.
func (c *Client) RLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindRead, name, false, 0, opts)
}

// TryRLock is RLock within wait.
func (c *Client) TryRLock(ctx context.Context, name string, wait time.Duration, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindRead, name, true, wait, opts)
}

// WLock takes the write (exclusive) hold of the read/write lock name.
func (c *Client) WLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindWrite, name, false, 0, opts)
}

// TryWLock is WLock within wait.
func (c *Client) TryWLock(ctx context.Context, name string, wait time.Duration, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindWrite, name, true, wait, opts)
}

// FairLock takes the fair lock name: waiters are served in the order they
// came, across every dlockd and Redisson client of the name.
func (c *Client) FairLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindFair, name, false, 0, opts)
}

// TryFairLock is FairLock within wait (0: one try, taking no place in the
// queue).
func (c *Client) TryFairLock(ctx context.Context, name string, wait time.Duration, opts ...Option) (*Lock, error) {
	return c.lockKind(ctx, kindFair, name, true, wait, opts)
}

func (c *Client) lockKind(ctx context.Context, k kind, name string, try bool, wait time.Duration, opts []Option) (*Lock, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	lease, err := leaseOf(opts)
	if err != nil {
		return nil, err
	}
	var deadline time.Time
	if try {
		if _, err := millis("wait", wait); err != nil {
			return nil, err
		}
		deadline = time.Now().Add(wait)
	}
	key, shared := gateKey(k, name), k == kindRead
	if err := c.gateAcquire(ctx, key, name, shared, try, deadline); err != nil {
		return nil, err
	}
	cl, err := c.grant(ctx, &grantSpec{kind: k, name: name, lease: lease}, try, deadline)
	if err != nil {
		if cl.lock == nil { // else the handle had the slot, and gave it back
			c.mu.Lock()
			if !c.closed {
				c.gateReleaseLocked(key, shared)
			}
			c.mu.Unlock()
		}
		return nil, err
	}
	return cl.lock, nil
}

// asked is what grant asks for: one name (*grantSpec) or a set of names
// (*multiSpec).
type asked interface {
	line(try bool, wait int64) string
	call(line string, waits bool) *call // a call that the reader hands the grant to
	label() string                      // the name(s) a TimeoutError names
}

func (s *grantSpec) call(line string, waits bool) *call {
	return &call{line: line, waits: waits, done: make(chan struct{}), spec: s}
}

func (s *grantSpec) label() string { return s.name }

// grant asks for a and returns the call with its OK reply, or the error:
// *TimeoutError, *Error, ErrCancelled. The waiting form (try unset) waits
// in dlockd; the client's other requests go on meanwhile.
func (c *Client) grant(ctx context.Context, a asked, try bool, deadline time.Time) (*call, error) {
	wait := int64(0)
	if try {
		if d := time.Until(deadline); d > 0 {
			wait, _ = millis("wait", d)
		}
	}
	cl := a.call(a.line(try, wait), !try || wait > 0)
	if err := c.do(ctx, cl); err != nil {
		return cl, err
	}
	switch {
	case strings.HasPrefix(cl.reply, "OK "):
		return cl, cl.err
	case strings.HasPrefix(cl.reply, "TIMEOUT"):
		ttl, _ := strconv.ParseInt(strings.TrimSpace(cl.reply[len("TIMEOUT"):]), 10, 64)
		return cl, &TimeoutError{Name: a.label(), TTL: time.Duration(ttl) * time.Millisecond}
	case strings.HasPrefix(cl.reply, "ERR "):
		return cl, replyError(cl.reply)
	}
	return cl, protoError("unexpected reply to " + cl.line + ": " + cl.reply)
}

// line is the request: the Try… form with wait_ms, or the waiting form.
func (s *grantSpec) line(try bool, wait int64) string {
	var b strings.Builder
	if try {
		b.WriteString(verbs[s.kind].try)
	} else {
		b.WriteString(verbs[s.kind].wait)
	}
	b.WriteByte(' ')
	b.WriteString(s.name)
	if s.kind == kindSem {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(s.permits))
	}
	if try {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(wait, 10))
	}
	if s.lease > 0 {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(s.lease, 10))
	}
	return b.String()
}

// grantedLocked runs in the reader on an OK reply to a grant request, so
// that the handle exists before any later line (a !LOST) is read.
func (c *Client) grantedLocked(cl *call) {
	s := cl.spec
	words := strings.Fields(cl.reply[3:])
	if s.kind == kindSem {
		if len(words) != 1 {
			cl.err = protoError("bad grant: " + cl.reply)
			return
		}
		held, err := strconv.Atoi(words[0])
		if err != nil {
			cl.err = protoError("bad grant: " + cl.reply)
			return
		}
		p := &Permits{hold: c.newHold(s.name, "", false), n: s.permits, held: held}
		p.hold.registerLocked()
		cl.permits = p
		return
	}
	if len(words) != 2 {
		cl.err = protoError("bad grant: " + cl.reply)
		return
	}
	fence, err1 := strconv.ParseUint(words[0], 10, 64)
	_, err2 := strconv.Atoi(words[1])
	if err1 != nil || err2 != nil {
		cl.err = protoError("bad grant: " + cl.reply)
		return
	}
	if r := s.reentry; r != nil {
		if r.ended || (r.kind != kindRead && fence != r.fence) {
			cl.stale = true
		} else {
			r.holds++
		}
		return
	}
	l := &Lock{hold: c.newHold(s.name, gateKey(s.kind, s.name), s.kind == kindRead), kind: s.kind,
		lease: s.lease, fence: fence, holds: 1}
	l.hold.registerLocked()
	cl.lock = l
}
