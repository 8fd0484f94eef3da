// Local exclusion: a per-name FIFO so that two goroutines of one client never hold one name at once.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"time"
)

// dlockd's owner is the connection, and its locks are reentrant for it: a
// second goroutine's LOCK of a name the client holds would be granted at
// once. So the client keeps its own FIFO per name and kind family (plain,
// fair, read/write): plain, fair and write locks take it alone, read locks
// share it. A request of another family goes to dlockd, which answers
// ERR KIND, rather than waiting here for a holder it can never follow.
type gate struct {
	excl    bool // an exclusive holder
	shared  int  // shared (read) holders
	waiters []*gateWaiter
}

type gateWaiter struct {
	shared  bool
	ready   chan struct{} // closed when granted (or failed: err)
	granted bool
	err     error
}

func (g *gate) fits(shared bool) bool {
	return !g.excl && (shared || g.shared == 0)
}

func (g *gate) take(shared bool) {
	if shared {
		g.shared++
	} else {
		g.excl = true
	}
}

// gateAcquire takes name's local slot, waiting in FIFO order. With try
// set it gives up at deadline with a *TimeoutError.
func (c *Client) gateAcquire(ctx context.Context, key, name string, shared, try bool, deadline time.Time) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return closedError(nil)
	}
	g := c.gates[key]
	if g == nil {
		g = &gate{}
		c.gates[key] = g
	}
	if len(g.waiters) == 0 && g.fits(shared) {
		g.take(shared)
		c.mu.Unlock()
		return nil
	}
	if try && !time.Now().Before(deadline) {
		c.mu.Unlock()
		return &TimeoutError{Name: name, TTL: -time.Millisecond}
	}
	w := &gateWaiter{shared: shared, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	c.mu.Unlock()

	var expired <-chan time.Time
	if try {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-w.ready:
		return w.err
	case <-ctx.Done():
		err = cancelError(ctx)
	case <-expired:
		err = &TimeoutError{Name: name, TTL: -time.Millisecond}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.granted {
		if w.err != nil {
			return w.err
		}
		c.gateReleaseLocked(key, shared)
		return err
	}
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
	c.gateWakeLocked(key, g)
	return err
}

// gateKey is the gate of name for a lock kind's family.
func gateKey(k kind, name string) string {
	switch k {
	case kindRead, kindWrite:
		return "rw " + name
	case kindFair:
		return "fair " + name
	}
	return "plain " + name
}

// gateReleaseLocked gives back one slot of a gate and wakes who fits next.
func (c *Client) gateReleaseLocked(key string, shared bool) {
	g := c.gates[key]
	if g == nil {
		return
	}
	if shared {
		g.shared--
	} else {
		g.excl = false
	}
	c.gateWakeLocked(key, g)
}

func (c *Client) gateWakeLocked(key string, g *gate) {
	for len(g.waiters) > 0 && g.fits(g.waiters[0].shared) {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		g.take(w.shared)
		w.granted = true
		close(w.ready)
	}
	if !g.excl && g.shared == 0 && len(g.waiters) == 0 {
		delete(c.gates, key)
	}
}
