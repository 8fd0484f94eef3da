// Semaphores: SEMINIT, ACQUIRE/TRYACQUIRE and the *Permits handle.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Permits are permits of a semaphore taken by Acquire or TryAcquire. The
// connection's permits of a name add up; a Permits gives back what it
// took. Its methods are safe for concurrent use.
type Permits struct {
	hold
	n    int // permits taken through this handle and not given back
	held int // the connection's permits of the name, as last answered
}

// Count is how many permits this handle holds (0 once all are given back
// or lost).
func (p *Permits) Count() int {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.ended {
		return 0
	}
	return p.n
}

// Held is the permits of the name the whole connection held at the last
// grant or release through this handle.
func (p *Permits) Held() int {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.held
}

// Release gives n of the handle's permits back and returns how many of
// the name the connection still holds. Giving back the last ends the
// handle (its Context is cancelled).
func (p *Permits) Release(n int) (int, error) {
	if err := checkPermits(n); err != nil {
		return 0, err
	}
	c := p.c
	c.mu.Lock()
	if p.ended || n > p.n {
		err := p.err
		c.mu.Unlock()
		if err == nil {
			err = &Error{Code: "NOTHELD", Text: "this handle holds fewer than " + strconv.Itoa(n) + " permits of " + p.name}
		}
		return 0, err
	}
	p.n -= n
	cl := newCall("RELEASE "+p.name+" "+strconv.Itoa(n), false)
	c.sendLocked(cl)
	if p.n == 0 {
		p.endLocked(nil)
	}
	c.mu.Unlock()
	<-cl.done
	if cl.err != nil {
		return 0, cl.err
	}
	if strings.HasPrefix(cl.reply, "ERR ") {
		if err := p.Err(); err != nil {
			return 0, err
		}
		return 0, replyError(cl.reply)
	}
	held, err := strconv.Atoi(strings.TrimPrefix(cl.reply, "OK "))
	if err != nil {
		return 0, protoError("RELEASE answered " + cl.reply)
	}
	c.mu.Lock()
	p.held = held
	c.mu.Unlock()
	return held, nil
}

// Renew renews the lease of all the connection's permits of the name.
func (p *Permits) Renew(ctx context.Context, lease time.Duration) (time.Duration, error) {
	return p.renew(ctx, lease)
}

// SemInit sets the semaphore's size unless it was set: true if it set it
// now, false if it had been set (unchanged).
func (c *Client) SemInit(ctx context.Context, name string, permits int) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if permits < 0 {
		return false, &Error{Code: "ARGS", Text: "permits must not be negative"}
	}
	words, err := c.simple(ctx, "SEMINIT "+name+" "+strconv.Itoa(permits))
	if err != nil {
		return false, err
	}
	return words == "1", nil
}

// Acquire takes n permits (1 to 10000) of the semaphore name, waiting as
// long as it takes (or until ctx ends).
func (c *Client) Acquire(ctx context.Context, name string, n int, opts ...Option) (*Permits, error) {
	return c.acquire(ctx, name, n, false, 0, opts)
}

// TryAcquire takes n permits if it can within wait; a *TimeoutError when
// it cannot.
func (c *Client) TryAcquire(ctx context.Context, name string, n int, wait time.Duration, opts ...Option) (*Permits, error) {
	return c.acquire(ctx, name, n, true, wait, opts)
}

func (c *Client) acquire(ctx context.Context, name string, n int, try bool, wait time.Duration, opts []Option) (*Permits, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkPermits(n); err != nil {
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
	cl, err := c.grant(ctx, &grantSpec{kind: kindSem, name: name, lease: lease, permits: n}, try, deadline)
	if err != nil {
		return nil, err
	}
	return cl.permits, nil
}
