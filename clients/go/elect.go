// Leader election: Elect (ELECT), the *Leadership handle (RESIGN, RENEW) and Leader (LEADER).
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// ValueMax is the longest leader value, in bytes.
const ValueMax = 255

// Leader is who leads a name: its fence and the value it campaigned with.
type Leader struct {
	Fence uint64
	Value string
}

// Leadership is leadership of a name won by Elect. It lasts until Resign,
// until its lease runs out without Renew (WithLease), or until the
// connection ends; its Context is cancelled when it ends, and Err then
// says why it was lost. Its methods are safe for concurrent use.
//
//	lead, err := c.Elect(ctx, "scheduler", "10.0.0.5:8080")
//	if err != nil { ... }
//	defer lead.Resign()
//	run(lead.Context(), lead.Fence()) // lead.Context() ends if leadership is lost
type Leadership struct {
	hold
	value string
	fence uint64
}

// electSpec is what an ELECT asks for, so the reader can make the
// *Leadership the moment OK is read (before any later !LOST).
type electSpec struct {
	name, value string
}

// Fence is the leadership's fence: it rises from leader to leader of the
// name. Pass it to what the leader writes to.
func (l *Leadership) Fence() uint64 { return l.fence }

// Value is the value this leader campaigned with (what observers see).
func (l *Leadership) Value() string { return l.value }

// Resign gives leadership up (RESIGN): the next candidate takes over at
// once. It returns nil if dlockd said this connection led, the handle's
// *LostError if leadership had been lost, and ErrNotHeld if it had been
// resigned already or dlockd no longer counted it. It waits for no other
// request than its own, so `defer lead.Resign()` is safe.
func (l *Leadership) Resign() error {
	c := l.c
	c.mu.Lock()
	if l.ended {
		err := l.err
		c.mu.Unlock()
		if err == nil {
			err = &Error{Code: "NOTHELD", Text: "leadership of " + l.name + " was resigned"}
		}
		return err
	}
	cl := newCall("RESIGN "+l.name, false)
	c.sendLocked(cl) // before the gate opens: the client's next Elect goes after it
	l.endLocked(nil)
	c.mu.Unlock()
	<-cl.done
	if cl.err != nil {
		return cl.err // the connection is gone, and with it the leadership
	}
	switch {
	case cl.reply == "OK 1":
		return nil
	case cl.reply == "OK 0":
		return &Error{Code: "NOTHELD", Text: "dlockd did not count " + l.name + " as led by this client"}
	case strings.HasPrefix(cl.reply, "ERR "):
		return replyError(cl.reply)
	}
	return protoError("RESIGN answered " + cl.reply)
}

// Renew renews the lease of a leadership won WithLease (RENEW): it now
// ends lease from now (0: dlockd's default lease). It returns the
// remaining lease.
func (l *Leadership) Renew(ctx context.Context, lease time.Duration) (time.Duration, error) {
	return l.renew(ctx, lease)
}

// ValidValue reports whether value is a leader value dlockd accepts: 1 to
// 255 bytes, each 0x21-0x7E (as a name).
func ValidValue(value string) bool { return ValidName(value) }

func checkValue(value string) error {
	if ValidValue(value) {
		return nil
	}
	return &Error{Code: "ARGS", Text: badWord("bad leader value", value)}
}

// Elect campaigns for leadership of name with value (what observers and
// LEADER are told, e.g. "10.0.0.5:8080"), and waits until this client
// leads: candidates are served in the order they came, across daemons.
// When ctx ends first, the campaign is withdrawn (CANCEL) and nothing
// stays held: ErrCancelled. WithLease gives the leadership a lease to
// Renew; without it the leadership lasts while the connection lives.
//
// A campaign holds back none of the client's other requests while it
// waits (an Observe of the same name, a Lock). Two goroutines of one
// client electing one name take turns in the client, as with Lock.
func (c *Client) Elect(ctx context.Context, name, value string, opts ...Option) (*Leadership, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	lease, err := leaseOf(opts)
	if err != nil {
		return nil, err
	}
	key := electGate(name)
	if err := c.gateAcquire(ctx, key, name, false, false, time.Time{}); err != nil {
		return nil, err
	}
	line := "ELECT " + name + " " + value
	if lease > 0 {
		line += " " + strconv.FormatInt(lease, 10)
	}
	cl := &call{line: line, waits: true, done: make(chan struct{}), elect: &electSpec{name: name, value: value}}
	err = c.do(ctx, cl)
	if err == nil {
		switch {
		case cl.leadership != nil:
			return cl.leadership, nil
		case cl.err != nil:
			err = cl.err
		case strings.HasPrefix(cl.reply, "ERR "):
			err = replyError(cl.reply)
		default:
			err = protoError("unexpected reply to ELECT: " + cl.reply)
		}
	}
	if cl.leadership == nil { // else the handle had the slot, and gave it back
		c.mu.Lock()
		if !c.closed {
			c.gateReleaseLocked(key, false)
		}
		c.mu.Unlock()
	}
	return nil, err
}

// electGate is the local gate of an election: one campaign (or leadership)
// of a name per client at a time.
func electGate(name string) string { return "elect " + name }

// electedLocked runs in the reader on the OK of an ELECT.
func (c *Client) electedLocked(cl *call) {
	words := strings.Fields(cl.reply[3:])
	var fence uint64
	var err error
	if len(words) == 1 {
		fence, err = strconv.ParseUint(words[0], 10, 64)
	}
	if len(words) != 1 || err != nil {
		cl.err = protoError("bad ELECT answer: " + cl.reply)
		return
	}
	s := cl.elect
	l := &Leadership{hold: c.newHold(s.name, electGate(s.name), false), value: s.value, fence: fence}
	l.hold.registerLocked()
	cl.leadership = l
}

// Leader asks dlockd who leads name: the leader and true, or false when
// nobody does.
func (c *Client) Leader(ctx context.Context, name string) (Leader, bool, error) {
	if err := checkName(name); err != nil {
		return Leader{}, false, err
	}
	words, err := c.simple(ctx, "LEADER "+name)
	if err != nil {
		return Leader{}, false, err
	}
	ch, err := parseLeader(words)
	if err != nil {
		return Leader{}, false, err
	}
	return ch.Leader, !ch.None, nil
}

// parseLeader reads "<fence> <value>" or "NONE".
func parseLeader(words string) (LeaderChange, error) {
	w := strings.Fields(words)
	if len(w) == 1 && w[0] == "NONE" {
		return LeaderChange{None: true}, nil
	}
	if len(w) == 2 {
		if fence, err := strconv.ParseUint(w[0], 10, 64); err == nil {
			return LeaderChange{Leader: Leader{Fence: fence, Value: w[1]}}, nil
		}
	}
	return LeaderChange{}, protoError("bad leader: " + words)
}
