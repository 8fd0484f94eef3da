// What every handle shares: its name, its loss signal and its end.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// hold is a handle's state, guarded by its client's mutex.
type hold struct {
	c      *Client
	name   string
	gate   string // the local gate it owns a slot of, "" for none
	shared bool   // ... a shared slot
	ended  bool
	err    error // *LostError once lost
	ctx    context.Context
	cancel context.CancelFunc
	lost   func(err error) // called (under the client's mutex) when lost, or nil
	// gateRefs, when set, counts the holds sharing the gate slot (a
	// multi-lock's reentry of a name a *Lock holds): the last releases it.
	gateRefs *int
}

func (c *Client) newHold(name, gate string, shared bool) hold {
	return hold{c: c, name: name, gate: gate, shared: shared}
}

func (h *hold) registerLocked() {
	h.c.holders[h.name] = append(h.c.holders[h.name], h)
}

// endLocked ends the handle: released (err nil) or lost.
func (h *hold) endLocked(err error) {
	if h.ended {
		return
	}
	h.ended, h.err = true, err
	c := h.c
	hs := c.holders[h.name]
	for i, x := range hs {
		if x == h {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(c.holders, h.name)
	} else {
		c.holders[h.name] = hs
	}
	if h.gate != "" && !c.closed {
		if h.gateRefs != nil && *h.gateRefs > 1 {
			*h.gateRefs--
		} else {
			c.gateReleaseLocked(h.gate, h.shared)
		}
	}
	if h.cancel != nil {
		h.cancel()
	}
	if err != nil && h.lost != nil {
		h.lost(err)
	}
}

// Name is the lock's (or semaphore's) name.
func (h *hold) Name() string { return h.name }

// Context is cancelled when the handle stops holding: when it is lost
// (Err then says why) or after its last hold was released. Run the work
// the lock protects under it.
func (h *hold) Context() context.Context {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancel(context.Background())
		if h.ended {
			h.cancel()
		}
	}
	return h.ctx
}

// Done is Context().Done().
func (h *hold) Done() <-chan struct{} { return h.Context().Done() }

// Err is nil while the handle holds or after it was released, and a
// *LostError once it was lost (reason expired, forced, backend or closed).
func (h *hold) Err() error {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.err
}

// renew sends RENEW for the handle's name.
func (h *hold) renew(ctx context.Context, lease time.Duration) (time.Duration, error) {
	ms, err := millis("lease", lease)
	if err != nil {
		return 0, err
	}
	if err := h.Err(); err != nil {
		return 0, err
	}
	line := "RENEW " + h.name
	if ms > 0 {
		line += " " + strconv.FormatInt(ms, 10)
	}
	words, err := h.c.simple(ctx, line)
	if err != nil {
		if lerr := h.Err(); lerr != nil {
			return 0, lerr
		}
		return 0, err
	}
	ttl, err := strconv.ParseInt(strings.TrimSpace(words), 10, 64)
	if err != nil {
		return 0, protoError("RENEW answered OK " + words)
	}
	return time.Duration(ttl) * time.Millisecond, nil
}
