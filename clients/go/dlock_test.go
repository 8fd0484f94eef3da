// Tests of the Go client against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestGrantFenceUnlock(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() == 0 || l.Holds() != 1 || l.Name() != name {
		t.Fatalf("fence %d holds %d name %q", l.Fence(), l.Holds(), l.Name())
	}
	st, err := c.Status(ctx, name)
	if err != nil || st.State != "MINE" || st.Fence != l.Fence() || st.Holds != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	if st, _ := other.Status(ctx, name); st.State != "TAKEN" {
		t.Fatalf("other sees %v", st)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the released handle's context", l.Done())
	if l.Err() != nil || l.Holds() != 0 {
		t.Fatalf("after unlock: err %v holds %d", l.Err(), l.Holds())
	}
	if err := l.Unlock(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second unlock: %v", err)
	}
	if st, _ := other.Status(ctx, name); st.String() != "FREE" {
		t.Fatalf("after unlock other sees %v", st)
	}
	l2, err := other.Lock(ctx, name, WithLease(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence did not rise: %d then %d", l.Fence(), l2.Fence())
	}
	if ttl, err := l2.Renew(ctx, 10*time.Second); err != nil || ttl <= 5*time.Second {
		t.Fatalf("renew: %v %v", ttl, err)
	}
	if err := other.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}

func TestTryLockTimeout(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	_, err = other.TryLock(ctx, name, 0)
	var te *TimeoutError
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &te) || te.TTL <= 0 {
		t.Fatalf("trylock 0: %v", err)
	}
	start := time.Now()
	if _, err = other.TryLock(ctx, name, 150*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("trylock 150ms: %v", err)
	}
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Fatalf("trylock 150ms came back after %v", d)
	}
	// the same client's second goroutine: the local FIFO times out too
	if _, err = c.TryLock(ctx, name, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("local trylock 0: %v", err)
	}
	if _, err = c.TryLock(ctx, name, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("local trylock 50ms: %v", err)
	}
}

func TestReentry(t *testing.T) {
	c := dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Relock(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status(ctx, name)
	if l.Holds() != 2 || st.Holds != 2 || st.Fence != l.Fence() {
		t.Fatalf("holds %d, status %v", l.Holds(), st)
	}
	if err := l.Unlock(); err != nil || l.Holds() != 1 {
		t.Fatalf("unlock: %v holds %d", err, l.Holds())
	}
	if st, _ := c.Status(ctx, name); st.State != "MINE" || st.Holds != 1 {
		t.Fatalf("status %v", st)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status(ctx, name); st.State != "FREE" {
		t.Fatalf("status %v", st)
	}
	if err := l.Relock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("relock of a released handle: %v", err)
	}
}

func TestLeaseExpiryLoss(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name, WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	waitDone(t, "the loss of an expired lease", lctx.Done())
	var lost *LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonExpired || lost.Name != name || !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("err %v", l.Err())
	}
	if err := l.Unlock(); !errors.As(err, &lost) {
		t.Fatalf("unlock of a lost lock: %v", err)
	}
	l2, err := other.TryLock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
	// the name is free for the client's next goroutine too
	l3, err := c.TryLock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	l3.Unlock()
}

func TestForceUnlockLoss(t *testing.T) {
	c, admin := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := admin.ForceUnlock(ctx, name); err != nil || !ok {
		t.Fatalf("forceunlock: %v %v", ok, err)
	}
	waitDone(t, "the loss of a forced lock", l.Done())
	var lost *LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonForced {
		t.Fatalf("err %v", l.Err())
	}
}

func TestContention(t *testing.T) {
	c := dial(t)
	ctx, prefix := guard(t), testName(t)
	const tasks, names, rounds = 100, 5, 10
	var holders [names]int32
	var mu sync.Mutex
	last := map[int]uint64{}
	var overlaps, nonrising, grants int32
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for i := 0; i < tasks; i++ {
		wg.Add(1)
		go func(task int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				k := (task + r) % names
				l, err := c.Lock(ctx, prefix+"-"+string(rune('a'+k)))
				if err != nil {
					errs <- err
					return
				}
				if atomic.AddInt32(&holders[k], 1) != 1 {
					atomic.AddInt32(&overlaps, 1)
				}
				mu.Lock()
				if l.Fence() <= last[k] {
					nonrising++
				}
				last[k] = l.Fence()
				grants++
				mu.Unlock()
				atomic.AddInt32(&holders[k], -1)
				if err := l.Unlock(); err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if grants != tasks*rounds || overlaps != 0 || nonrising != 0 {
		t.Fatalf("grants %d overlaps %d nonrising %d", grants, overlaps, nonrising)
	}
}

// A wait withdrawn with CANCEL: the call fails with ErrCancelled and the
// client holds nothing afterwards.
func TestCancelDuringWait(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := holder.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	base := waiters(t, checker)
	wctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := c.Lock(wctx, name)
		res <- err
	}()
	waitFor(t, "the LOCK to wait in dlockd", func() bool { return waiters(t, checker) > base })
	cancel()
	select {
	case err = <-res:
	case <-time.After(hangGuard):
		t.Fatal("the cancelled Lock did not return")
	}
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lock: %v", err)
	}
	if err := c.Ping(ctx); err != nil { // the connection is in step
		t.Fatal(err)
	}
	l.Unlock()
	l2, err := checker.TryLock(ctx, name, 0)
	if err != nil {
		t.Fatalf("after the cancel the lock is not free: %v", err)
	}
	l2.Unlock()
}

// The grant racing the cancel: whatever wins, nothing stays held.
func TestCancelRace(t *testing.T) {
	holder, c, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	for i := 0; i < 20; i++ {
		l, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan *Lock, 1)
		errc := make(chan error, 1)
		go func() {
			got, err := c.Lock(wctx, name)
			res <- got
			errc <- err
		}()
		waitFor(t, "the LOCK to wait", func() bool { return waiters(t, checker) > 0 })
		l.Unlock()
		cancel()
		got, err := <-res, <-errc
		if err == nil {
			got.Unlock()
		} else if !errors.Is(err, ErrCancelled) {
			t.Fatal(err)
		}
		l2, err := checker.TryLock(ctx, name, 0)
		if err != nil {
			t.Fatalf("round %d: not free after the cancel: %v", i, err)
		}
		l2.Unlock()
	}
}

// A cancel of a goroutine waiting in the client (for the name's local
// FIFO) sends nothing.
func TestCancelLocalWaits(t *testing.T) {
	c := dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(wctx, name); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("local wait: %v", err)
	}
	l.Unlock()
	l, err = c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
}

// dlockd killed while a request waits: the call fails at once with
// ErrClosed, and the client's handles are lost ("closed").
func TestDaemonKilledDuringWait(t *testing.T) {
	sockOf(t)
	sock, cmd, err := startDaemonCmd("killed")
	if err != nil {
		t.Fatal(err)
	}
	c, holder := dialPath(t, sock), dialPath(t, sock)
	ctx, name := guard(t), testName(t)
	mine, err := c.Lock(ctx, name+"-mine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, name)
		res <- err
	}()
	waitFor(t, "the LOCK to wait", func() bool { return waiters(t, holder) > 0 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-res:
	case <-time.After(hangGuard):
		t.Fatal("the waiting Lock hangs after dlockd died")
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting lock: %v", err)
	}
	waitDone(t, "the held lock's loss", mine.Done())
	var lost *LostError
	if !errors.As(mine.Err(), &lost) || lost.Reason != ReasonClosed || !errors.Is(mine.Err(), ErrClosed) {
		t.Fatalf("held lock: %v", mine.Err())
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("ping after: %v", err)
	}
}

func TestCloseFailsPendingAndFrees(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	mine, err := c.Lock(ctx, name+"-mine")
	if err != nil {
		t.Fatal(err)
	}
	blocker, err := other.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Unlock()
	res := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, name)
		res <- err
	}()
	waitFor(t, "the LOCK to wait", func() bool { return waiters(t, other) > 0 })
	c.Close()
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending: %v", err)
	}
	if !errors.Is(mine.Err(), ErrClosed) {
		t.Fatalf("handle: %v", mine.Err())
	}
	l, err := other.TryLock(ctx, name+"-mine", 0)
	if err != nil {
		t.Fatalf("a closed client's lock is not free: %v", err)
	}
	l.Unlock()
	if _, err := c.Lock(ctx, name); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	c.Close()
}

func TestMissingSocket(t *testing.T) {
	sockOf(t)
	path := filepath.Join(env.tmp, "nothing-here.sock")
	_, err := Dial(context.Background(), path)
	var ce *ConnectError
	if !errors.As(err, &ce) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("dial: %v", err)
	}
	want := "cannot connect to dlockd at " + path + ": No such file or directory (is dlockd running?)"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

func TestDefaultSocketFromEnv(t *testing.T) {
	t.Setenv(SocketEnv, sockOf(t))
	c, err := DialDefault(guard(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Path() != env.sock || c.Ping(guard(t)) != nil {
		t.Fatal("DialDefault did not use $DLOCK_SOCKET")
	}
}

func TestReadWriteLock(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	r1, err := c.RLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.TryRLock(ctx, name, time.Second) // a second local reader shares it
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status(ctx, name); st.String() != "READ 1 2 "+ms(st.TTL) {
		t.Fatalf("status %v", st)
	}
	if _, err := other.TryWLock(ctx, name, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("trywlock while read: %v", err)
	}
	if _, err := c.Lock(ctx, name); !errors.Is(err, ErrKind) {
		t.Fatalf("plain lock of a rwlock: %v", err)
	}
	r1.Unlock()
	r2.Unlock()
	w, err := other.WLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := other.Status(ctx, name); st.State != "WRITE" || st.Holds != 1 {
		t.Fatalf("status %v", st)
	}
	if w.Fence() <= r1.Fence() {
		t.Fatalf("write fence %d after read fence %d", w.Fence(), r1.Fence())
	}
	if err := w.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphore(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	if set, err := c.SemInit(ctx, name, 2); err != nil || !set {
		t.Fatalf("seminit: %v %v", set, err)
	}
	if set, err := c.SemInit(ctx, name, 5); err != nil || set {
		t.Fatalf("seminit again: %v %v", set, err)
	}
	p1, err := c.Acquire(ctx, name, 1)
	if err != nil || p1.Held() != 1 {
		t.Fatalf("acquire: %v", err)
	}
	p2, err := c.TryAcquire(ctx, name, 1, time.Second)
	if err != nil || p2.Held() != 2 {
		t.Fatalf("acquire 2: %v", err)
	}
	if _, err := other.TryAcquire(ctx, name, 1, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("tryacquire of a full semaphore: %v", err)
	}
	if st, _ := other.Status(ctx, name); st.String() != "SEM 0 0" {
		t.Fatalf("status %v", st)
	}
	if held, err := p1.Release(1); err != nil || held != 1 {
		t.Fatalf("release: %d %v", held, err)
	}
	if _, err := p1.Release(1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release again: %v", err)
	}
	if _, err := c.Acquire(ctx, name, 0); !errors.Is(err, ErrArgs) {
		t.Fatalf("acquire 0: %v", err)
	}
	if held, err := p2.Release(1); err != nil || held != 0 {
		t.Fatalf("release: %d %v", held, err)
	}
}

func TestFairLock(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.FairLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryFairLock(ctx, name, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("tryfairlock: %v", err)
	}
	if st, _ := c.Status(ctx, name); st.State != "MINE" || st.Fence != l.Fence() {
		t.Fatalf("status %v", st)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := other.TryFairLock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}

func TestBadInputNoDesync(t *testing.T) {
	c := dial(t)
	ctx := guard(t)
	for _, bad := range []string{"", "a b", "tab\tname", "é", strings.Repeat("x", 300)} {
		if _, err := c.Lock(ctx, bad); !errors.Is(err, ErrName) {
			t.Fatalf("lock %q: %v", bad, err)
		}
		if _, err := c.Status(ctx, bad); !errors.Is(err, ErrName) {
			t.Fatalf("status %q: %v", bad, err)
		}
	}
	if _, err := c.TryLock(ctx, "x", -time.Second); !errors.Is(err, ErrArgs) {
		t.Fatalf("negative wait: %v", err)
	}
	if _, err := c.Lock(ctx, "x", WithLease(-1)); !errors.Is(err, ErrArgs) {
		t.Fatalf("negative lease: %v", err)
	}
	name := testName(t)
	if _, err := c.SemInit(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	_, err := c.Lock(ctx, name) // a daemon-side error, then in step
	var de *Error
	if !errors.Is(err, ErrKind) || !errors.As(err, &de) || de.Text == "" {
		t.Fatalf("lock of a semaphore: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, strings.Repeat("y", 255)+"")
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
}

func TestLocker(t *testing.T) {
	c := dial(t)
	k := c.Locker(testName(t))
	var sl sync.Locker = k
	counter, inside := 0, int32(0)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				sl.Lock()
				if atomic.AddInt32(&inside, 1) != 1 || k.Handle() == nil {
					t.Error("two goroutines inside the Locker")
				}
				counter++
				atomic.AddInt32(&inside, -1)
				sl.Unlock()
			}
		}()
	}
	wg.Wait()
	if counter != 100 || k.Err() != nil {
		t.Fatalf("counter %d err %v", counter, k.Err())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked Locker did not panic")
		}
	}()
	sl.Unlock()
}

func ms(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix((d.Truncate(time.Millisecond)/time.Millisecond*time.Millisecond).String(), "ms"), "s")
}

// A lease of 1 ns is 1 ms in dlockd, not 0 (no lease: the watchdog's,
// held while the connection lives): the lock runs out and is free.
func TestSubMsLeaseExpires(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name, WithLease(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss of a 1 ns lease", l.Context().Done())
	var lost *LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonExpired {
		t.Fatalf("err %v", l.Err())
	}
	l2, err := other.TryLock(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}
