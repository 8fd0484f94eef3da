// Election tests against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

type electRes struct {
	l   *Leadership
	err error
}

// campaign runs c.Elect in a goroutine.
func campaign(ctx context.Context, c *Client, name, value string) <-chan electRes {
	res := make(chan electRes, 1)
	go func() {
		l, err := c.Elect(ctx, name, value)
		res <- electRes{l, err}
	}()
	return res
}

func won(t *testing.T, res <-chan electRes) *Leadership {
	t.Helper()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.l
	case <-time.After(hangGuard):
		t.Fatal("the campaign did not win")
	}
	return nil
}

// waitCandidates waits until dlockd counts more waiting requests than base
// (a campaign waiting in ELECT counts as a waiter).
func waitCandidates(t *testing.T, checker *Client, base int) {
	t.Helper()
	waitFor(t, "the ELECT to wait in dlockd", func() bool { return waiters(t, checker) > base })
}

// Campaign, then hand-over on Resign: the next candidate leads with a
// higher fence, LEADER and an observer say so.
func TestElectResignHandOver(t *testing.T) {
	a, b, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	if _, ok, err := checker.Leader(ctx, name); ok || err != nil {
		t.Fatalf("leader before: %v %v", ok, err)
	}
	la, err := a.Elect(ctx, name, "a:1")
	if err != nil {
		t.Fatal(err)
	}
	if la.Fence() == 0 || la.Value() != "a:1" {
		t.Fatalf("fence %d value %q", la.Fence(), la.Value())
	}
	if ld, ok, err := checker.Leader(ctx, name); !ok || err != nil || ld != (Leader{la.Fence(), "a:1"}) {
		t.Fatalf("leader: %+v %v %v", ld, ok, err)
	}
	base := waiters(t, checker)
	rb := campaign(ctx, b, name, "b:2")
	waitCandidates(t, checker, base)
	if err := la.Resign(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "a's context", la.Done())
	if la.Err() != nil {
		t.Fatalf("a resigned, err %v", la.Err())
	}
	lb := won(t, rb)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence did not rise: %d then %d", la.Fence(), lb.Fence())
	}
	if ld, ok, _ := checker.Leader(ctx, name); !ok || ld.Value != "b:2" || ld.Fence != lb.Fence() {
		t.Fatalf("leader after hand-over: %+v", ld)
	}
	if err := la.Resign(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second resign: %v", err)
	}
	if err := lb.Resign(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := checker.Leader(ctx, name); ok {
		t.Fatal("a leader after every candidate resigned")
	}
}

// The leader's client closes: the next candidate leads; the closed
// leadership reports ReasonClosed.
func TestElectLeaderClosedNext(t *testing.T) {
	a, b, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	la, err := a.Elect(ctx, name, "a")
	if err != nil {
		t.Fatal(err)
	}
	base := waiters(t, checker)
	rb := campaign(ctx, b, name, "b")
	waitCandidates(t, checker, base)
	a.Close()
	waitDone(t, "a's loss", la.Done())
	var lost *LostError
	if !errors.As(la.Err(), &lost) || lost.Reason != ReasonClosed {
		t.Fatalf("a's err %v", la.Err())
	}
	lb := won(t, rb)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence did not rise: %d then %d", la.Fence(), lb.Fence())
	}
	lb.Resign()
}

// An observer sees every leader in fence order. dlockd may coalesce: a
// NONE may come between two leaders (PROTOCOL.md), so the leaders are
// checked with NONEs skipped, and the whole stream against the promises.
func TestObserveFenceOrder(t *testing.T) {
	a, b, obsc := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	o, err := obsc.Observe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var told []LeaderChange
	nextLeader := func() LeaderChange {
		for {
			ch := next(t, o)
			told = append(told, ch)
			if !ch.None {
				return ch
			}
		}
	}
	if ch := next(t, o); !ch.None {
		t.Fatalf("first change %+v", ch)
	}
	var fences []uint64
	for round := 0; round < 3; round++ {
		la, err := a.Elect(ctx, name, "a")
		if err != nil {
			t.Fatal(err)
		}
		base := waiters(t, obsc)
		rb := campaign(ctx, b, name, "b")
		waitCandidates(t, obsc, base)
		if ch := nextLeader(); ch.Fence != la.Fence() || ch.Value != "a" {
			t.Fatalf("round %d: a's change %+v (fence %d)", round, ch, la.Fence())
		}
		la.Resign()
		lb := won(t, rb)
		if ch := nextLeader(); ch.Fence != lb.Fence() || ch.Value != "b" {
			t.Fatalf("round %d: b's change %+v (fence %d)", round, ch, lb.Fence())
		}
		lb.Resign()
		if ch := next(t, o); !ch.None {
			t.Fatalf("round %d: no NONE after the last resign: %+v", round, ch)
		}
		told = append(told, LeaderChange{None: true})
		fences = append(fences, la.Fence(), lb.Fence())
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fences not rising: %v", fences)
		}
	}
	var last uint64
	for i, ch := range told {
		switch {
		case ch.None && i > 0 && told[i-1].None:
			t.Fatalf("NONE twice in a row: %+v", told)
		case !ch.None && (ch.Fence < last || ch.Fence == last && (i == 0 || !told[i-1].None)):
			t.Fatalf("fence %d told after %d: %+v", ch.Fence, last, told)
		case !ch.None:
			last = ch.Fence
		}
	}
	o.Close()
	if _, ok := <-o.Changes(); ok {
		t.Fatal("a change after Close")
	}
	if err := obsc.Ping(ctx); err != nil { // UNOBSERVE's answer kept the connection in step
		t.Fatal(err)
	}
}

// A campaign cancelled while it waits in dlockd: ErrCancelled, and the
// client is no candidate afterwards.
func TestElectCancel(t *testing.T) {
	a, b, checker := dial(t), dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	la, err := a.Elect(ctx, name, "a")
	if err != nil {
		t.Fatal(err)
	}
	base := waiters(t, checker)
	wctx, cancel := context.WithCancel(ctx)
	rb := campaign(wctx, b, name, "b")
	waitCandidates(t, checker, base)
	cancel()
	select {
	case r := <-rb:
		if !errors.Is(r.err, ErrCancelled) {
			t.Fatalf("cancelled campaign: %+v", r)
		}
	case <-time.After(hangGuard):
		t.Fatal("the cancelled Elect did not return")
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	la.Resign()
	if ld, ok, _ := checker.Leader(ctx, name); ok {
		t.Fatalf("the cancelled candidate leads: %+v", ld)
	}
	lb, err := b.Elect(ctx, name, "b")
	if err != nil {
		t.Fatal(err)
	}
	lb.Resign()
}

// A bad value is refused before it is sent; an election name is not a
// lock, nor a lock name an election.
func TestElectBadValueAndKind(t *testing.T) {
	c := dial(t)
	ctx, name := guard(t), testName(t)
	if _, err := c.Elect(ctx, name, "a b"); !errors.Is(err, ErrArgs) {
		t.Fatalf("bad value: %v", err)
	}
	if _, err := c.Elect(ctx, name, string(make300())); !errors.Is(err, ErrArgs) {
		t.Fatalf("long value: %v", err)
	}
	l, err := c.Elect(ctx, name, long255)
	if err != nil {
		t.Fatal(err)
	}
	if ld, ok, _ := c.Leader(ctx, name); !ok || ld.Value != long255 {
		t.Fatalf("leader %+v", ld)
	}
	other := dial(t)
	if _, err := other.TryLock(ctx, name, 0); !errors.Is(err, ErrKind) {
		t.Fatalf("lock of an election name: %v", err)
	}
	l.Resign()
	lk, err := c.Lock(ctx, name+"-lock")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock()
	if _, err := other.Elect(ctx, name+"-lock", "v"); !errors.Is(err, ErrKind) {
		t.Fatalf("elect of a lock name: %v", err)
	}
}
