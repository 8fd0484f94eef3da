// Election tests against the scripted fake dlockd: cancel races, FIFO rules, event routing.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// next reads one change, failing the test after the hang guard.
func next(t *testing.T, o *Observation) LeaderChange {
	t.Helper()
	select {
	case ch, ok := <-o.Changes():
		if !ok {
			t.Fatalf("changes of %s closed: %v", o.Name(), o.Err())
		}
		return ch
	case <-time.After(hangGuard):
		t.Fatalf("no change of %s", o.Name())
	}
	return LeaderChange{}
}

// A campaign cancelled in dlockd (ERR CANCELLED + OK 1), then one whose
// election raced the CANCEL (OK <fence> + OK 0): it is resigned.
func TestFakeElectCancel(t *testing.T) {
	c, f := newFake(t)
	ctx, cancel := context.WithCancel(guard(t))
	res := make(chan error, 1)
	go func() {
		_, err := c.Elect(ctx, "e", "v1", WithLease(3*time.Second))
		res <- err
	}()
	te := f.expect(t, "ELECT e v1 3000")
	cancel()
	tc := f.expect(t, "CANCEL #"+te)
	f.send(t, "#"+te+" ERR CANCELLED withdrawn", "#"+tc+" OK 1")
	if err := <-res; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("elect: %v", err)
	}

	ctx, cancel = context.WithCancel(guard(t))
	go func() {
		_, err := c.Elect(ctx, "e", "v2")
		res <- err
	}()
	te = f.expect(t, "ELECT e v2")
	cancel()
	tc = f.expect(t, "CANCEL #"+te)
	f.send(t, "#"+te+" OK 12", "#"+tc+" OK 0")
	f.reply(t, f.expect(t, "RESIGN e"), "OK 1")
	if err := <-res; !errors.Is(err, ErrCancelled) {
		t.Fatalf("raced elect: %v", err)
	}
	go f.serve(t, "ELECT e v3", "OK 13") // the local gate was given back
	l, err := c.Elect(guard(t), "e", "v3")
	if err != nil || l.Fence() != 13 || l.Value() != "v3" || l.Name() != "e" {
		t.Fatalf("elect: %v %+v", err, l)
	}
}

// A waiting ELECT holds back none of the client's other requests: an
// OBSERVE goes out and is answered while it waits. A second campaign of
// the same name waits in the client (nothing sent) until the first
// leadership ends, and RESIGN goes out before it.
func TestFakeObserveBesideElect(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	type res struct {
		l   *Leadership
		err error
	}
	first, second := make(chan res, 1), make(chan res, 1)
	go func() {
		l, err := c.Elect(ctx, "n", "a")
		first <- res{l, err}
	}()
	te := f.expect(t, "ELECT n a")
	go func() {
		l, err := c.Elect(ctx, "n", "b") // waits for the first's leadership to end
		second <- res{l, err}
	}()
	obs := make(chan *Observation, 1)
	go func() {
		o, err := c.Observe(ctx, "m")
		if err != nil {
			t.Error(err)
		}
		obs <- o
	}()
	f.reply(t, f.expect(t, "OBSERVE m"), "OK NONE")
	o := <-obs
	if ch := next(t, o); !ch.None {
		t.Fatalf("first change %+v", ch)
	}
	select {
	case l := <-f.lines:
		t.Fatalf("sent %q: a second campaign of n beside the first", l)
	case <-time.After(100 * time.Millisecond): // a check that nothing is sent
	}
	f.send(t, "!LEADER m 4 a")
	f.reply(t, te, "OK 4")
	r := <-first
	if r.err != nil || r.l.Fence() != 4 {
		t.Fatalf("first: %+v", r)
	}
	if ch := next(t, o); ch.None || ch.Fence != 4 || ch.Value != "a" {
		t.Fatalf("second change %+v", ch)
	}
	go f.serve(t, "RESIGN n", "OK 1")
	if err := r.l.Resign(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the resigned leadership's context", r.l.Done())
	if err := r.l.Resign(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second resign: %v", err)
	}
	te = f.expect(t, "ELECT n b")
	f.send(t, "!LEADER m 5 b", "#"+te+" OK 5")
	if r := <-second; r.err != nil || r.l.Fence() != 5 {
		t.Fatalf("second: %+v", r)
	}
	if ch := next(t, o); ch.Fence != 5 || ch.Value != "b" {
		t.Fatalf("third change %+v", ch)
	}
}

// Events reach every local observation of the name, in order; UNOBSERVE
// goes once the last one ends; a !LOST ends a leadership.
func TestFakeObserveAndLoss(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "OBSERVE x", "OK NONE")
	o1, err := c.Observe(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if ch := next(t, o1); !ch.None {
		t.Fatalf("first %+v", ch)
	}
	f.send(t, "!LEADER x 7 host-a:1")
	go f.serve(t, "OBSERVE x", "OK 7 host-a:1")
	o2ctx, o2cancel := context.WithCancel(ctx)
	o2, err := c.Observe(o2ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	f.send(t, "!LEADER x NONE", "!LEADER y 1 z", "!LEADER x 9 "+long255)
	for i, want := range []LeaderChange{{Leader: Leader{7, "host-a:1"}}, {None: true},
		{Leader: Leader{9, long255}}} {
		if got := next(t, o1); got != want {
			t.Fatalf("o1 change %d: %+v", i, got)
		}
	}
	for i, want := range []LeaderChange{{Leader: Leader{7, "host-a:1"}}, {None: true}} {
		if got := next(t, o2); got != want {
			t.Fatalf("o2 change %d: %+v", i, got)
		}
	}
	o1.Close()
	if _, ok := <-o1.Changes(); ok {
		t.Fatal("a change after Close")
	}
	o2cancel()
	waitDone(t, "o2's end", o2.Done())
	if !errors.Is(o2.Err(), ErrCancelled) {
		t.Fatalf("o2 err %v", o2.Err())
	}
	f.reply(t, f.expect(t, "UNOBSERVE x"), "OK 1")

	go f.serve(t, "ELECT x v 500", "OK 3", "!LOST x expired")
	l, err := c.Elect(ctx, "x", "v", WithLease(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss", l.Done())
	var lost *LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonExpired {
		t.Fatalf("err %v", l.Err())
	}
	if err := l.Resign(); !errors.Is(err, ErrLost) {
		t.Fatalf("resign of a lost leadership: %v", err)
	}
	go f.serve(t, "LEADER x", "OK NONE")
	if _, ok, err := c.Leader(ctx, "x"); ok || err != nil {
		t.Fatalf("leader: %v %v", ok, err)
	}
	go f.serve(t, "OBSERVE w", "ERR LIMIT too many observed names")
	if _, err := c.Observe(ctx, "w"); !errors.Is(err, ErrLimit) {
		t.Fatalf("observe above the limit: %v", err)
	}
	f.reply(t, f.expect(t, "UNOBSERVE w"), "OK 0") // harmless
	f.conn.Close()                                 // dlockd goes away
	c.Close()
	if err := l.Resign(); !errors.Is(err, ErrLost) {
		t.Fatalf("resign after close: %v", err)
	}
}

// The connection ending closes every observation with ErrClosed and loses
// the leadership ("closed").
func TestFakeObserveClosed(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "ELECT a v", "OK 1")
	l, err := c.Elect(ctx, "a", "v")
	if err != nil {
		t.Fatal(err)
	}
	go f.serve(t, "OBSERVE a", "OK 1 v")
	o, err := c.Observe(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	f.conn.Close()
	waitDone(t, "the observation's end", o.Done())
	waitDone(t, "the leadership's end", l.Done())
	if !errors.Is(o.Err(), ErrClosed) || !errors.Is(l.Err(), ErrClosed) {
		t.Fatalf("observation %v leadership %v", o.Err(), l.Err())
	}
}

// Bad values and names fail before anything is sent.
func TestFakeElectBadInput(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	for _, v := range []string{"", "a b", string(make300()), "caf\u00e9"} {
		if _, err := c.Elect(ctx, "n", v); !errors.Is(err, ErrArgs) {
			t.Fatalf("value %q: %v", v, err)
		}
	}
	if _, err := c.Elect(ctx, "a b", "v"); !errors.Is(err, ErrName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := c.Observe(ctx, ""); !errors.Is(err, ErrName) {
		t.Fatalf("observe bad name: %v", err)
	}
	if _, _, err := c.Leader(ctx, string(make300())); !errors.Is(err, ErrName) {
		t.Fatalf("leader bad name: %v", err)
	}
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// long255 is the longest value: its event is longer than 383 bytes with a long name.
var long255 = string(make300()[:ValueMax])

func make300() []byte {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 'v'
	}
	return b
}
