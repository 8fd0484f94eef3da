// Many goroutines waiting at once on one client (tagged requests, issue 38), against the real dlockd.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"math/rand"
	"strconv"
	"testing"
	"time"
)

// promptly bounds what must not wait for another goroutine's wait: far
// above a request's round trip on a busy machine, far below "forever".
const promptly = 3 * time.Second

// waitsAt is n goroutines of c each locking prefix-i while holder holds
// every name: it returns once dlockd counts all n waiting. Each grant (or
// error) comes on granted as the goroutine's index; locks[i] is its lock.
type waitsAt struct {
	held    []*Lock
	locks   []*Lock
	errs    []error
	cancels []context.CancelFunc
	granted chan int
}

func manyWaits(t *testing.T, holder, c, checker *Client, prefix string, n int) *waitsAt {
	t.Helper()
	ctx := guard(t)
	w := &waitsAt{held: make([]*Lock, n), locks: make([]*Lock, n), errs: make([]error, n),
		cancels: make([]context.CancelFunc, n), granted: make(chan int, n)}
	for i := range w.held {
		l, err := holder.Lock(ctx, prefix+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		w.held[i] = l
	}
	base := waiters(t, checker)
	for i := 0; i < n; i++ {
		wctx, cancel := context.WithCancel(ctx)
		w.cancels[i] = cancel
		t.Cleanup(cancel)
		go func(i int) {
			w.locks[i], w.errs[i] = c.Lock(wctx, prefix+strconv.Itoa(i))
			w.granted <- i
		}(i)
	}
	waitFor(t, strconv.Itoa(n)+" locks of one client to wait in dlockd at once",
		func() bool { return waiters(t, checker) >= base+n })
	return w
}

// releaseEach releases the holder's names in order, and checks that each
// release grants its own waiter next, and no other.
func (w *waitsAt) releaseEach(t *testing.T, order []int) {
	t.Helper()
	for _, i := range order {
		if err := w.held[i].Unlock(); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-w.granted:
			if g != i {
				t.Fatalf("released %d, then %d came back (err %v)", i, g, w.errs[g])
			}
			if w.errs[i] != nil {
				t.Fatalf("lock %d: %v", i, w.errs[i])
			}
			if w.locks[i].Fence() <= w.held[i].Fence() {
				t.Fatalf("lock %d: fence %d after the holder's %d", i, w.locks[i].Fence(), w.held[i].Fence())
			}
		case <-time.After(hangGuard):
			t.Fatalf("released %d: its waiter was not granted", i)
		}
	}
}

// N goroutines wait on one client for names held elsewhere; the names are
// released one at a time in random order, and each release grants its own
// waiter, whatever the others wait for.
func TestManyWaitsOneClient(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	const n = 20
	w := manyWaits(t, holder, c, checker, testName(t)+"-", n)
	w.releaseEach(t, rand.Perm(n))
	for _, l := range w.locks {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

// One waiter of many is cancelled: it returns ErrCancelled at once and
// holds nothing; the others go on waiting and are granted as before.
func TestCancelOneOfMany(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	const n, k = 20, 7
	prefix := testName(t) + "-"
	w := manyWaits(t, holder, c, checker, prefix, n)
	base := waiters(t, checker)
	w.cancels[k]()
	select {
	case g := <-w.granted:
		if g != k || !errors.Is(w.errs[k], ErrCancelled) || !errors.Is(w.errs[k], context.Canceled) {
			t.Fatalf("cancelled %d, then %d came back: %v", k, g, w.errs[g])
		}
	case <-time.After(promptly):
		t.Fatalf("the cancelled Lock did not return within %v", promptly)
	}
	waitFor(t, "dlockd to count one waiter less", func() bool { return waiters(t, checker) == base-1 })
	select {
	case g := <-w.granted:
		t.Fatalf("%d came back after another's cancel: %v", g, w.errs[g])
	default:
	}
	var order []int
	for _, i := range rand.Perm(n) {
		if i != k {
			order = append(order, i)
		}
	}
	w.releaseEach(t, order)
	if err := w.held[k].Unlock(); err != nil {
		t.Fatal(err)
	}
	ctx := guard(t)
	if st, err := c.Status(ctx, prefix+strconv.Itoa(k)); err != nil || st.State != "FREE" {
		t.Fatalf("the cancelled name: %v %v", st, err)
	}
	for _, i := range order {
		if err := w.locks[i].Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

// While one goroutine of a client waits in dlockd, the client's others
// are served: an Unlock releases at once (another client gets the name),
// STATUS and LIST are answered.
func TestUnlockNotBehindWait(t *testing.T) {
	c, other, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	mine, err := c.Lock(ctx, name+"-a")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Lock(ctx, name+"-b")
	if err != nil {
		t.Fatal(err)
	}
	base := waiters(t, checker)
	res := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, name+"-b")
		if err == nil {
			err = l.Unlock()
		}
		res <- err
	}()
	waitFor(t, "the lock of b to wait", func() bool { return waiters(t, checker) > base })

	unlocked := make(chan error, 1)
	go func() { unlocked <- mine.Unlock() }()
	select {
	case err := <-unlocked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(promptly):
		t.Fatalf("Unlock of a did not return within %v while another goroutine waits for b", promptly)
	}
	l, err := other.TryLock(ctx, name+"-a", 0)
	if err != nil {
		t.Fatalf("a is not free after its Unlock returned: %v", err)
	}
	l.Unlock()
	qctx, cancel := context.WithTimeout(ctx, promptly)
	defer cancel()
	if st, err := c.Status(qctx, name+"-b"); err != nil || st.State != "TAKEN" {
		t.Fatalf("status while waiting: %v %v", st, err)
	}
	ls, err := c.List(qctx, name+"-*")
	if err != nil || len(ls.Entries) != 1 || ls.Entries[0].Waiters.Total != 1 {
		t.Fatalf("list while waiting: %+v %v", ls, err)
	}
	theirs.Unlock()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the wait for b was not granted")
	}
}

// Close with many waits in dlockd: every pending call fails at once with
// ErrClosed, and what the client held is free when Close returns.
func TestCloseWithManyWaits(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	ctx, prefix := guard(t), testName(t)+"-"
	mine, err := c.Lock(ctx, prefix+"mine")
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	w := manyWaits(t, holder, c, checker, prefix, n)
	c.Close()
	for i := 0; i < n; i++ {
		select {
		case g := <-w.granted:
			if !errors.Is(w.errs[g], ErrClosed) {
				t.Fatalf("pending %d: %v", g, w.errs[g])
			}
		case <-time.After(hangGuard):
			t.Fatal("a pending Lock did not return after Close")
		}
	}
	if !errors.Is(mine.Err(), ErrClosed) {
		t.Fatalf("held: %v", mine.Err())
	}
	l, err := checker.TryLock(ctx, prefix+"mine", 0)
	if err != nil {
		t.Fatalf("a closed client's lock is not free after Close: %v", err)
	}
	l.Unlock()
	waitFor(t, "the closed client's waits to go", func() bool { return waiters(t, checker) == 0 })
}
