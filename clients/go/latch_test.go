// Count-down latches against real dlockd daemons sharing one redis-server.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Ten waits on two daemons (five goroutines on each client) all return
// after the third count-down, none before; the latch is then gone.
func TestLatchManyWaiters(t *testing.T) {
	sock2, err := startDaemon("latch2")
	if err != nil {
		t.Fatal(err)
	}
	a, b, counter := dial(t), dialPath(t, sock2), dial(t)
	ctx, name := guard(t), testName(t)
	if set, err := counter.LatchSet(ctx, name, 3); err != nil || !set {
		t.Fatalf("latchset: %v %v", set, err)
	}
	if set, err := a.LatchSet(ctx, name, 5); err != nil || set {
		t.Fatalf("latchset of a latch that exists: %v %v", set, err)
	}
	if n, err := b.LatchCount(ctx, name); err != nil || n != 3 {
		t.Fatalf("latchcount on the other daemon: %d %v", n, err)
	}
	if n, ok, err := b.TryAwait(ctx, name, 0); err != nil || ok || n != 3 {
		t.Fatalf("tryawait 0: %d %v %v", n, ok, err)
	}
	start := time.Now()
	if n, ok, err := a.TryAwait(ctx, name, 100*time.Millisecond); err != nil || ok || n != 3 {
		t.Fatalf("tryawait 100ms: %d %v %v", n, ok, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("tryawait 100ms gave up after %v", d)
	}

	baseA, baseB := waiters(t, counter), waiters(t, b)
	res := make(chan error, 10)
	for i := 0; i < 10; i++ {
		c := a
		if i%2 == 1 {
			c = b
		}
		go func() { res <- c.Await(ctx, name) }()
	}
	waitFor(t, "the ten AWAITs to wait in the two daemons", func() bool {
		return waiters(t, counter) == baseA+5 && waiters(t, b) == baseB+5
	})
	for want := int64(2); want > 0; want-- {
		if n, err := counter.CountDown(ctx, name); err != nil || n != want {
			t.Fatalf("countdown: %d %v, want %d", n, err, want)
		}
	}
	if n, ok, err := b.TryAwait(ctx, name, 0); err != nil || ok || n != 1 {
		t.Fatalf("tryawait at 1: %d %v %v", n, ok, err)
	}
	select {
	case err := <-res:
		t.Fatalf("an await returned at count 1: %v", err)
	default:
	}
	if n, err := counter.CountDown(ctx, name); err != nil || n != 0 {
		t.Fatalf("the last countdown: %d %v", n, err)
	}
	for i := 0; i < 10; i++ {
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("await %d: %v", i, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("only %d of the 10 awaits returned", i)
		}
	}
	if n, err := a.LatchCount(ctx, name); err != nil || n != 0 {
		t.Fatalf("latchcount after 0: %d %v", n, err)
	}
	if n, err := a.CountDown(ctx, name); err != nil || n != 0 {
		t.Fatalf("countdown of a latch that is gone: %d %v", n, err)
	}
	if err := b.Await(ctx, name); err != nil { // a latch that does not exist is open
		t.Fatalf("await of a latch that is gone: %v", err)
	}
	if n, ok, err := a.TryAwait(ctx, name, 0); err != nil || !ok || n != 0 {
		t.Fatalf("tryawait of a latch that is gone: %d %v %v", n, ok, err)
	}
}

// A cancelled Await leaves no waiter in dlockd; the client goes on.
func TestLatchAwaitCancel(t *testing.T) {
	c, checker := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	if _, err := c.LatchSet(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	base := waiters(t, checker)
	wctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- c.Await(wctx, name) }()
	waitFor(t, "the AWAIT to wait in dlockd", func() bool { return waiters(t, checker) > base })
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, ErrCancelled) {
			t.Fatalf("cancelled await: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the cancelled Await did not return")
	}
	waitFor(t, "the AWAIT to be withdrawn", func() bool { return waiters(t, checker) == base })
	if n, err := c.CountDown(ctx, name); err != nil || n != 0 {
		t.Fatalf("countdown: %d %v", n, err)
	}
}

// A latch is not a lock, nor a lock a latch: ERR KIND both ways.
func TestLatchKind(t *testing.T) {
	c := dial(t)
	ctx := guard(t)
	latch, lock := testName(t), testName(t)
	if _, err := c.LatchSet(ctx, latch, 2); err != nil {
		t.Fatal(err)
	}
	defer c.CountDown(ctx, latch)
	defer c.CountDown(ctx, latch)
	if _, err := c.TryLock(ctx, latch, 0); !errors.Is(err, ErrKind) {
		t.Fatalf("trylock of a latch: %v", err)
	}
	l, err := c.Lock(ctx, lock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := c.LatchSet(ctx, lock, 1); !errors.Is(err, ErrKind) {
		t.Fatalf("latchset of a lock: %v", err)
	}
	if _, err := c.CountDown(ctx, lock); !errors.Is(err, ErrKind) {
		t.Fatalf("countdown of a lock: %v", err)
	}
	if _, _, err := c.TryAwait(ctx, lock, 0); !errors.Is(err, ErrKind) {
		t.Fatalf("tryawait of a lock: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
