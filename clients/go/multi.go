// Multi-name locks: MultiLock and TryMultiLock (MLOCK, TRYMLOCK) and the *MultiHold handle (MUNLOCK).
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MultiNamesMax is the most names one MultiLock may ask for
// (PROTO_MNAMES_MAX in dlockd).
const MultiNamesMax = 64

// MultiHold is a set of plain locks granted together by MultiLock or
// TryMultiLock: dlockd granted every name at once, and the caller never
// held part of the set while it waited. Each name is an ordinary plain
// lock hold of the connection. Its methods are safe for concurrent use.
//
//	m, err := c.MultiLock(ctx, []string{"acct-17", "acct-42"})
//	if err != nil { ... }
//	defer m.Unlock()
//	transfer(m.Context(), m.Fences())   // m.Context() ends if any name is lost
type MultiHold struct {
	h        hold // the set's loss signal (no name, no gate, not registered)
	names    []string
	fences   []uint64
	parts    []*hold // one per name, registered for !LOST, owning the name's local gate
	released bool
	left     []int // the connection's holds of each name after Unlock
}

// multiSpec is what an MLOCK or TRYMLOCK asks for, so that the reader
// can make the *MultiHold the moment OK is read (before any later !LOST).
type multiSpec struct {
	names []string
	lease int64            // ms, 0 = watchdog
	held  map[string]*Lock // names the caller holds through these handles
}

// Names are the set's names, in the order they were asked for.
func (m *MultiHold) Names() []string { return append([]string(nil), m.names...) }

// Fences are the grant's fences, one per name in the order of Names: pass
// each to the resource its name protects.
func (m *MultiHold) Fences() []uint64 { return append([]uint64(nil), m.fences...) }

// Fence is the fence of one name of the set, 0 if it is not in the set.
func (m *MultiHold) Fence(name string) uint64 {
	for i, n := range m.names {
		if n == name {
			return m.fences[i]
		}
	}
	return 0
}

// Context is cancelled when the set stops being all held: when the first
// of its names is lost (Err then says which and why) or after Unlock.
// The other names stay held until Unlock.
func (m *MultiHold) Context() context.Context { return m.h.Context() }

// Done is Context().Done().
func (m *MultiHold) Done() <-chan struct{} { return m.h.Done() }

// Err is nil while the whole set is held or after it was released, and
// the *LostError of the first name lost (reason expired, forced, backend
// or closed) once one was.
func (m *MultiHold) Err() error { return m.h.Err() }

// Holds is 1 while the set is held through this handle, 0 once it was
// unlocked or one of its names was lost.
func (m *MultiHold) Holds() int {
	m.h.c.mu.Lock()
	defer m.h.c.mu.Unlock()
	if m.h.ended {
		return 0
	}
	return 1
}

// HoldsLeft is, after Unlock, the connection's holds of each name (in the
// order of Names) as dlockd answered MUNLOCK: 0, or the holds of a *Lock
// the set reentered (WithHeld); nil before Unlock.
func (m *MultiHold) HoldsLeft() []int {
	m.h.c.mu.Lock()
	defer m.h.c.mu.Unlock()
	return append([]int(nil), m.left...)
}

// Unlock releases every name of the set still held (MUNLOCK), then lets
// the client's goroutines waiting for them go. It returns the *LostError
// of the first name lost if one was (the others are released all the
// same), and ErrNotHeld if the set was unlocked already. `defer
// m.Unlock()` is safe.
func (m *MultiHold) Unlock() error {
	c := m.h.c
	c.mu.Lock()
	if m.released {
		err := m.h.err
		c.mu.Unlock()
		if err == nil {
			err = &Error{Code: "NOTHELD", Text: "the set " + strings.Join(m.names, ",") + " was unlocked"}
		}
		return err
	}
	m.released = true
	var live []string
	for _, p := range m.parts {
		if !p.ended {
			live = append(live, p.name)
		}
	}
	c.mu.Unlock()
	var err error
	for len(live) > 0 { // a name dlockd lost before telling us: release the rest
		cl := newCall(multiLine("MUNLOCK", live), false)
		if e := c.do(context.Background(), cl); e != nil {
			err = e
			break
		}
		if strings.HasPrefix(cl.reply, "OK") {
			words := strings.Fields(cl.reply[2:])
			left := make([]int, len(m.names))
			for i, n := range live {
				if i < len(words) {
					k, _ := strconv.Atoi(words[i])
					left[indexOf(m.names, n)] = k
				}
			}
			c.mu.Lock()
			m.left = left
			c.mu.Unlock()
			break
		}
		e := replyError(cl.reply)
		if err == nil {
			err = e
		}
		if !strings.HasPrefix(cl.reply, "ERR NOTHELD ") {
			break
		}
		named := strings.Fields(cl.reply[len("ERR NOTHELD "):])
		rest := live[:0:0]
		for _, n := range live {
			if !contains(named, n) {
				rest = append(rest, n)
			}
		}
		if len(rest) == len(live) {
			break
		}
		live = rest
	}
	c.mu.Lock()
	for _, p := range m.parts { // only now: the names' next local holders go after MUNLOCK
		p.endLocked(nil)
	}
	m.h.endLocked(nil)
	if m.h.err != nil {
		err = m.h.err
	}
	c.mu.Unlock()
	return err
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

func contains(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// MultiLock takes the plain locks of all names at once, waiting as long
// as it takes (or until ctx ends: ErrCancelled, and nothing stays held).
// dlockd grants the whole set or nothing, and the caller holds none of it
// while it waits, so two callers asking for the same names in different
// orders cannot deadlock. names: 1 to MultiNamesMax distinct valid names
// (else ErrArgs or ErrName, before anything is sent). WithLease gives
// every name the same lease.
//
// Two goroutines of one client never hold one name at once: MultiLock
// waits locally, in the order of the sorted names, until none of the set
// is held through another handle of this client. While the request waits
// in dlockd, the client's other requests go on.
func (c *Client) MultiLock(ctx context.Context, names []string, opts ...Option) (*MultiHold, error) {
	return c.multiLock(ctx, names, false, 0, opts)
}

// TryMultiLock is MultiLock within wait (0: one try); a *TimeoutError
// (errors.Is ErrTimeout) when the set could not be had, with nothing held.
func (c *Client) TryMultiLock(ctx context.Context, names []string, wait time.Duration, opts ...Option) (*MultiHold, error) {
	return c.multiLock(ctx, names, true, wait, opts)
}

// checkNames applies MLOCK's rules to a set of names.
func checkNames(names []string) error {
	if len(names) < 1 || len(names) > MultiNamesMax {
		return &Error{Code: "ARGS", Text: "a multi-lock takes 1 to " + strconv.Itoa(MultiNamesMax) +
			" names, not " + strconv.Itoa(len(names))}
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
		if seen[n] {
			return &Error{Code: "ARGS", Text: "name " + n + " given twice"}
		}
		seen[n] = true
	}
	return nil
}

func (c *Client) multiLock(ctx context.Context, names []string, try bool, wait time.Duration, opts []Option) (*MultiHold, error) {
	if err := checkNames(names); err != nil {
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
	held := map[string]*Lock{}
	for _, l := range optionsOf(opts).held {
		if l != nil && l.c == c && l.kind == kindPlain && contains(names, l.name) && l.Holds() > 0 {
			held[l.name] = l
		}
	}
	// The local gates, in a fixed (sorted) order: no two goroutines of this
	// client can each hold a gate the other waits for. The caller's own
	// locks' gates are theirs already.
	var sorted []string
	for _, n := range names {
		if held[n] == nil {
			sorted = append(sorted, n)
		}
	}
	sort.Strings(sorted)
	release := func(taken []string) {
		c.mu.Lock()
		if !c.closed {
			for _, n := range taken {
				c.gateReleaseLocked(gateKey(kindPlain, n), false)
			}
		}
		c.mu.Unlock()
	}
	for i, n := range sorted {
		if err := c.gateAcquire(ctx, gateKey(kindPlain, n), n, false, try, deadline); err != nil {
			release(sorted[:i])
			if te, ok := err.(*TimeoutError); ok {
				te.Name = strings.Join(names, ",")
			}
			return nil, err
		}
	}
	spec := &multiSpec{names: append([]string(nil), names...), lease: lease, held: held}
	cl, err := c.grant(ctx, spec, try, deadline)
	if err != nil {
		if cl.mhold == nil { // else the handle had the gates, and gave them back
			release(sorted)
		}
		return nil, err
	}
	return cl.mhold, nil
}

func (s *multiSpec) call(line string, waits bool) *call {
	return &call{line: line, waits: waits, done: make(chan struct{}), multi: s}
}

func (s *multiSpec) label() string { return strings.Join(s.names, ",") }

// multiLine is "<verb> <n> <name1> … <name_n>".
func multiLine(verb string, names []string) string {
	return verb + " " + strconv.Itoa(len(names)) + " " + strings.Join(names, " ")
}

// line is TRYMLOCK with wait_ms, or MLOCK.
func (s *multiSpec) line(try bool, wait int64) string {
	if try {
		l := multiLine("TRYMLOCK", s.names) + " " + strconv.FormatInt(wait, 10)
		if s.lease > 0 {
			l += " " + strconv.FormatInt(s.lease, 10)
		}
		return l
	}
	l := multiLine("MLOCK", s.names)
	if s.lease > 0 {
		l += " " + strconv.FormatInt(s.lease, 10)
	}
	return l
}

// multiGrantedLocked runs in the reader on the OK of an MLOCK/TRYMLOCK.
func (c *Client) multiGrantedLocked(cl *call) {
	s := cl.multi
	words := strings.Fields(cl.reply[3:])
	if len(words) != len(s.names) {
		cl.err = protoError("bad multi-lock grant: " + cl.reply)
		return
	}
	fences := make([]uint64, len(words))
	for i, w := range words {
		f, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			cl.err = protoError("bad multi-lock grant: " + cl.reply)
			return
		}
		fences[i] = f
	}
	m := &MultiHold{h: hold{c: c}, names: s.names, fences: fences}
	for _, n := range s.names {
		p := new(hold)
		*p = c.newHold(n, gateKey(kindPlain, n), false)
		if l := s.held[n]; l != nil { // a reentry: share the gate slot with l's hold
			if l.ended {
				p.gate = ""
			} else {
				if l.gateRefs == nil {
					one := 1
					l.gateRefs = &one
				}
				*l.gateRefs++
				p.gateRefs = l.gateRefs
			}
		}
		p.lost = func(err error) { m.h.endLocked(err) } // the first loss ends the set
		p.registerLocked()
		m.parts = append(m.parts, p)
	}
	cl.mhold = m
}
