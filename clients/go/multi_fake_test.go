// Multi-lock tests against the scripted fake dlockd: the wire lines, cancel races, loss routing, local gates.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Bad sets are refused before anything is sent: n out of range, a
// duplicate (ErrArgs), a bad name (ErrName).
func TestFakeMultiBadInput(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	many := make([]string, MultiNamesMax+1)
	for i := range many {
		many[i] = "n" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		names []string
		want  error
	}{
		{nil, ErrArgs},
		{[]string{}, ErrArgs},
		{many, ErrArgs},
		{[]string{"a", "b", "a"}, ErrArgs},
		{[]string{"a", strings.Repeat("n", 300)}, ErrName},
		{[]string{"a", "has space"}, ErrName},
	} {
		if _, err := c.MultiLock(ctx, tc.names); !errors.Is(err, tc.want) {
			t.Fatalf("MultiLock(%d names): %v, want %v", len(tc.names), err, tc.want)
		}
		if _, err := c.TryMultiLock(ctx, tc.names, 0); !errors.Is(err, tc.want) {
			t.Fatalf("TryMultiLock(%d names): %v, want %v", len(tc.names), err, tc.want)
		}
	}
	go f.serve(t, "PING", "OK PONG") // nothing else reached the wire
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// MultiLock waits in dlockd (MLOCK); the fences come in the order asked;
// Unlock sends MUNLOCK of the set.
func TestFakeMultiGrantAndUnlock(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	res := make(chan *MultiHold, 1)
	go func() {
		m, err := c.MultiLock(ctx, []string{"b", "a"}, WithLease(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		res <- m
	}()
	f.reply(t, f.expect(t, "MLOCK 2 b a 5000"), "OK 7 3")
	m := <-res
	if m == nil {
		t.FailNow()
	}
	if got := m.Fences(); len(got) != 2 || got[0] != 7 || got[1] != 3 || m.Fence("a") != 3 || m.Holds() != 1 {
		t.Fatalf("fences %v holds %d", got, m.Holds())
	}
	go f.serve(t, "MUNLOCK 2 b a", "OK 0 0")
	if err := m.Unlock(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the released set's context", m.Done())
	if m.Err() != nil || m.Holds() != 0 {
		t.Fatalf("err %v holds %d", m.Err(), m.Holds())
	}
	if err := m.Unlock(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second unlock: %v", err)
	}
	go f.serve(t, "TRYMLOCK 1 a 250", "TIMEOUT 40")
	_, err := c.TryMultiLock(ctx, []string{"a"}, 250*time.Millisecond)
	var te *TimeoutError
	if !errors.As(err, &te) || te.TTL != 40*time.Millisecond {
		t.Fatalf("trymultilock: %v", err)
	}
}

// A cancelled MLOCK (ERR CANCELLED + OK 1), then one whose grant raced the
// CANCEL (OK + OK 0): the client releases the set with MUNLOCK.
func TestFakeMultiCancel(t *testing.T) {
	c, f := newFake(t)
	for _, raced := range []bool{false, true} {
		ctx, cancel := context.WithCancel(guard(t))
		res := make(chan error, 1)
		go func() {
			_, err := c.MultiLock(ctx, []string{"x", "y"})
			res <- err
		}()
		tm := f.expect(t, "MLOCK 2 x y")
		cancel()
		tc := f.expect(t, "CANCEL #"+tm)
		if raced {
			f.send(t, "#"+tm+" OK 4 5", "#"+tc+" OK 0")
			f.reply(t, f.expect(t, "MUNLOCK 2 x y"), "OK 0 0")
		} else {
			f.send(t, "#"+tm+" ERR CANCELLED withdrawn", "#"+tc+" OK 1")
		}
		if err := <-res; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("raced %v: %v", raced, err)
		}
	}
	// the local gates were given back: a Lock of y goes straight out
	go f.serve(t, "LOCK y", "OK 6 1")
	if _, err := c.Lock(guard(t), "y"); err != nil {
		t.Fatal(err)
	}
}

// The first !LOST of a name ends the set's context once; Unlock then
// releases the names still held and returns the loss; a name dlockd lost
// without telling yet (ERR NOTHELD) does not keep the others held.
func TestFakeMultiLoss(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "TRYMLOCK 3 p q r 0 1000", "OK 1 2 3", "!LOST q expired")
	m, err := c.TryMultiLock(ctx, []string{"p", "q", "r"}, 0, WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss", m.Done())
	var lost *LostError
	if !errors.As(m.Err(), &lost) || lost.Name != "q" || lost.Reason != ReasonExpired || m.Holds() != 0 {
		t.Fatalf("err %v holds %d", m.Err(), m.Holds())
	}
	f.send(t, "!LOST p forced")
	go f.serve(t, "PING", "OK PONG") // the second !LOST is read before this reply
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		f.serve(t, "MUNLOCK 1 r", "ERR NOTHELD r")
	}()
	if err := m.Unlock(); !errors.As(err, &lost) || lost.Name != "q" {
		t.Fatalf("unlock: %v", err)
	}

	go f.serve(t, "TRYMLOCK 2 s t 0", "OK 8 9", "!LOST s expired")
	m, err = c.TryMultiLock(ctx, []string{"s", "t"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss", m.Done())
	go f.serve(t, "MUNLOCK 1 t", "OK 0")
	if err := m.Unlock(); !errors.Is(err, ErrLost) {
		t.Fatalf("unlock: %v", err)
	}

	go func() { // dlockd lost u before it said so: the retry releases v
		f.serve(t, "TRYMLOCK 2 u v 0", "OK 1 1")
		f.serve(t, "MUNLOCK 2 u v", "ERR NOTHELD u")
		f.serve(t, "MUNLOCK 1 v", "OK 0")
	}()
	m, err = c.TryMultiLock(ctx, []string{"u", "v"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("unlock: %v", err)
	}
}

// Goroutines of one client asking for {a,b} and {b,a} take the local
// gates in sorted order: one gets the set, the other waits in the client
// (nothing sent) and goes once the first unlocked; a Lock of b waits too.
func TestFakeMultiLocalGates(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "MLOCK 2 a b", "OK 1 1")
	first, err := c.MultiLock(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan *MultiHold, 1)
	go func() {
		m, err := c.MultiLock(ctx, []string{"b", "a"})
		if err != nil {
			t.Error(err)
		}
		second <- m
	}()
	single := make(chan *Lock, 1)
	go func() {
		l, err := c.TryLock(ctx, "b", time.Minute)
		if err != nil {
			t.Error(err)
		}
		single <- l
	}()
	select {
	case l := <-f.lines:
		t.Fatalf("sent %q while the set was held locally", l)
	case <-time.After(100 * time.Millisecond): // a check that nothing is sent
	}
	go f.serve(t, "MUNLOCK 2 a b", "OK 0 0")
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	// whichever queued first on b's gate goes first; serve both in turn
	tag, got := f.next(t)
	if strings.HasPrefix(got, "TRYLOCK b ") { // its wait is what is left of a minute
		got = "TRYLOCK b"
	}
	switch got {
	case "MLOCK 2 b a":
		f.reply(t, tag, "OK 2 2")
		m := <-second
		go f.serve(t, "MUNLOCK 2 b a", "OK 0 0")
		if err := m.Unlock(); err != nil {
			t.Fatal(err)
		}
		tag, l := f.next(t)
		if !strings.HasPrefix(l, "TRYLOCK b ") {
			t.Fatalf("sent %q", l)
		}
		f.reply(t, tag, "OK 3 1")
		<-single
	case "TRYLOCK b":
		f.reply(t, tag, "OK 2 1")
		l := <-single
		go f.serve(t, "UNLOCK b", "OK 0")
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		f.reply(t, f.expect(t, "MLOCK 2 b a"), "OK 3 3")
		<-second
	default:
		t.Fatalf("unexpected %q", got)
	}
}
