// Multi-lock tests against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func names3(t *testing.T) []string {
	base := testName(t)
	return []string{base + "-a", base + "-b", base + "-c"}
}

func statusOf(t *testing.T, c *Client, name string) Status {
	t.Helper()
	st, err := c.Status(guard(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A grant: fences in the order asked, each name MINE with its fence;
// Unlock frees them all.
func TestMultiGrant(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, ns := guard(t), names3(t)
	m, err := c.MultiLock(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	f := m.Fences()
	for i, n := range ns {
		st := statusOf(t, c, n)
		if st.State != "MINE" || st.Holds != 1 || st.Fence != f[i] {
			t.Fatalf("%s: %v, fence %d", n, st, f[i])
		}
		if st := statusOf(t, other, n); st.State != "TAKEN" {
			t.Fatalf("%s for another client: %v", n, st)
		}
	}
	if err := m.Unlock(); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if st := statusOf(t, other, n); st.State != "FREE" {
			t.Fatalf("%s after Unlock: %v", n, st)
		}
	}
	m2, err := c.TryMultiLock(ctx, ns, 0, WithLease(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, f2 := range m2.Fences() {
		if f2 <= f[i] {
			t.Fatalf("fence of %s did not rise: %d after %d", ns[i], f2, f[i])
		}
	}
	if err := m2.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// All or nothing: while another client holds one of three names, a
// TryMultiLock times out and a MultiLock waits holding none of them (as
// STATUS shows); it is granted when that name is freed.
func TestMultiAllOrNothing(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	ctx, ns := guard(t), names3(t)
	l, err := holder.Lock(ctx, ns[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryMultiLock(ctx, ns, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("trymultilock: %v", err)
	}
	base := waiters(t, checker)
	res := make(chan *MultiHold, 1)
	go func() {
		m, err := c.MultiLock(ctx, ns)
		if err != nil {
			t.Error(err)
		}
		res <- m
	}()
	waitFor(t, "the MLOCK to wait in dlockd", func() bool { return waiters(t, checker) > base })
	for _, n := range []string{ns[0], ns[2]} {
		if st := statusOf(t, checker, n); st.State != "FREE" {
			t.Fatalf("%s while the MLOCK waits: %v", n, st)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	var m *MultiHold
	select {
	case m = <-res:
	case <-time.After(hangGuard):
		t.Fatal("MLOCK not granted after the last name was freed")
	}
	if m == nil {
		t.FailNow()
	}
	for _, n := range ns {
		if st := statusOf(t, checker, n); st.State != "TAKEN" {
			t.Fatalf("%s after the grant: %v", n, st)
		}
	}
	if err := m.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// Two clients locking {a,b} and {b,a} over and over, and two goroutines
// of one client doing the same: no deadlock, never both at once.
func TestMultiOppositeOrders(t *testing.T) {
	c1, c2 := dial(t), dial(t)
	ctx := guard(t)
	base := testName(t)
	a, b := base+"-a", base+"-b"
	const rounds = 100
	var mu sync.Mutex
	holding := 0
	var wg sync.WaitGroup
	run := func(c *Client, set []string) {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			m, err := c.MultiLock(ctx, set)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			holding++
			if holding > 1 {
				t.Error("two holders of the set at once")
			}
			mu.Unlock()
			mu.Lock()
			holding--
			mu.Unlock()
			if err := m.Unlock(); err != nil {
				t.Error(err)
				return
			}
		}
	}
	wg.Add(4)
	go run(c1, []string{a, b})
	go run(c2, []string{b, a})
	go run(c1, []string{b, a}) // same client: the local gates, in sorted order
	go run(c2, []string{a, b})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "the opposite-order lockers (a deadlock?)", done)
}

// A cancelled MultiLock leaves nothing held, whether dlockd withdrew it
// or the grant raced the cancel.
func TestMultiCancel(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	ctx, ns := guard(t), names3(t)
	for i := 0; i < 10; i++ {
		l, err := holder.Lock(ctx, ns[2])
		if err != nil {
			t.Fatal(err)
		}
		base := waiters(t, checker)
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			m, err := c.MultiLock(wctx, ns)
			if err == nil {
				err = m.Unlock()
			}
			res <- err
		}()
		waitFor(t, "the MLOCK to wait", func() bool { return waiters(t, checker) > base })
		if i%2 == 1 {
			l.Unlock() // the grant may race the cancel
		}
		cancel()
		if err := <-res; err != nil && !errors.Is(err, ErrCancelled) {
			t.Fatal(err)
		}
		if i%2 == 0 {
			l.Unlock()
		}
		if err := c.Ping(ctx); err != nil { // the connection is in step
			t.Fatal(err)
		}
		// The set's acquire may still be in Redis (its undo queued right
		// behind it): dlockd lets the names go when its answer is back.
		m, err := checker.TryMultiLock(ctx, ns, 5*time.Second)
		if err != nil {
			for _, n := range ns {
				t.Logf("%s: %v (for c: %v)", n, statusOf(t, checker, n), statusOf(t, c, n))
			}
			t.Fatalf("round %d: not all free after the cancel: %v", i, err)
		}
		m.Unlock()
	}
}

// A lost name ends the set's context and leaves the others held until
// Unlock, which releases them and returns the loss.
func TestMultiLoss(t *testing.T) {
	c, admin := dial(t), dial(t)
	ctx, ns := guard(t), names3(t)
	m, err := c.MultiLock(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ForceUnlock(ctx, ns[1]); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss", m.Done())
	var lost *LostError
	if !errors.As(m.Err(), &lost) || lost.Name != ns[1] || lost.Reason != ReasonForced {
		t.Fatalf("err %v", m.Err())
	}
	if st := statusOf(t, c, ns[0]); st.State != "MINE" {
		t.Fatalf("%s after losing %s: %v", ns[0], ns[1], st)
	}
	if err := m.Unlock(); !errors.Is(err, ErrLost) {
		t.Fatalf("unlock: %v", err)
	}
	for _, n := range ns {
		if st := statusOf(t, admin, n); st.State != "FREE" {
			t.Fatalf("%s after Unlock: %v", n, st)
		}
	}
}

// Bad sets are refused locally with ErrArgs / ErrName, and the
// connection stays in step.
func TestMultiBadInput(t *testing.T) {
	c := dial(t)
	ctx := guard(t)
	base := testName(t)
	many := make([]string, MultiNamesMax+1)
	for i := range many {
		many[i] = base + "-" + strconv.Itoa(i)
	}
	for _, set := range [][]string{nil, many, {base, base}} {
		if _, err := c.MultiLock(ctx, set); !errors.Is(err, ErrArgs) {
			t.Fatalf("%d names: %v", len(set), err)
		}
	}
	if _, err := c.TryMultiLock(ctx, []string{base, "bad name"}, 0); !errors.Is(err, ErrName) {
		t.Fatalf("bad name: %v", err)
	}
	m, err := c.TryMultiLock(ctx, many[:MultiNamesMax], 0)
	if err != nil {
		t.Fatalf("%d names: %v", MultiNamesMax, err)
	}
	if err := m.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// WithHeld: a set with a name the caller holds reenters it (the hold's
// fence, MINE 2), HoldsLeft says 1 0, and the name's gate stays closed
// to the client's other goroutines until both handles let go.
func TestMultiWithHeld(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx := guard(t)
	base := testName(t)
	x, y := base+"-x", base+"-y"
	l, err := c.Lock(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MultiLock(ctx, []string{x, y}, WithHeld(l))
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Fences(); f[0] != l.Fence() {
		t.Fatalf("fences %v, lock's %d", f, l.Fence())
	}
	if st := statusOf(t, c, x); st.State != "MINE" || st.Holds != 2 {
		t.Fatalf("%s: %v", x, st)
	}
	if err := l.Unlock(); err != nil { // the set still holds x
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, x, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("another goroutine's TryLock of %s while the set holds it: %v", x, err)
	}
	if err := m.Unlock(); err != nil {
		t.Fatal(err)
	}
	if left := m.HoldsLeft(); len(left) != 2 || left[0] != 0 || left[1] != 0 {
		t.Fatalf("holds left %v", left)
	}
	for _, n := range []string{x, y} {
		if st := statusOf(t, other, n); st.State != "FREE" {
			t.Fatalf("%s: %v", n, st)
		}
	}
	l2, err := c.TryLock(ctx, x, 0)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := c.TryMultiLock(ctx, []string{y, x}, 0, WithHeld(l2))
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Unlock(); err != nil {
		t.Fatal(err)
	}
	if left := m2.HoldsLeft(); left[0] != 0 || left[1] != 1 {
		t.Fatalf("holds left %v", left)
	}
	l2.Unlock()
}
