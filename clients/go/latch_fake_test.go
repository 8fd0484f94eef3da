// Count-down latches against the scripted fake dlockd: the lines sent, the replies read, cancels, bad input.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LATCHSET, COUNTDOWN and LATCHCOUNT go out as the protocol spells them,
// and their OK <n> comes back as a number.
func TestFakeLatchRequests(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "LATCHSET b 3", "OK 1")
	if set, err := c.LatchSet(ctx, "b", 3); err != nil || !set {
		t.Fatalf("latchset: %v %v", set, err)
	}
	go f.serve(t, "LATCHSET b 2147483647", "OK 0")
	if set, err := c.LatchSet(ctx, "b", NumMax); err != nil || set {
		t.Fatalf("latchset of a latch that exists: %v %v", set, err)
	}
	go f.serve(t, "COUNTDOWN b", "OK 2")
	if n, err := c.CountDown(ctx, "b"); err != nil || n != 2 {
		t.Fatalf("countdown: %d %v", n, err)
	}
	go f.serve(t, "LATCHCOUNT b", "OK 2")
	if n, err := c.LatchCount(ctx, "b"); err != nil || n != 2 {
		t.Fatalf("latchcount: %d %v", n, err)
	}
	go f.serve(t, "COUNTDOWN b", "ERR KIND b is held as a plain lock")
	if _, err := c.CountDown(ctx, "b"); !errors.Is(err, ErrKind) {
		t.Fatalf("countdown of a lock: %v", err)
	}
	go f.serve(t, "LATCHCOUNT b", "OK -1")
	if _, err := c.LatchCount(ctx, "b"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("OK -1: %v", err)
	}
	go f.serve(t, "PING", "OK PONG") // the client is still in step
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// A bad name, a count outside 1..NumMax or a negative wait is refused
// before anything is sent: the next line the fake reads is the PING.
func TestFakeLatchBadInput(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	for _, n := range []int64{0, -1, NumMax + 1} {
		if _, err := c.LatchSet(ctx, "b", n); !errors.Is(err, ErrArgs) {
			t.Fatalf("latchset %d: %v", n, err)
		}
	}
	if _, err := c.LatchSet(ctx, "a b", 1); !errors.Is(err, ErrName) || !strings.Contains(err.Error(), `"a b"`) {
		t.Fatalf("latchset of a bad name: %v", err)
	}
	if _, err := c.CountDown(ctx, ""); !errors.Is(err, ErrName) {
		t.Fatalf("countdown of the empty name: %v", err)
	}
	if _, err := c.LatchCount(ctx, strings.Repeat("x", 256)); !errors.Is(err, ErrName) {
		t.Fatalf("latchcount of 256 bytes: %v", err)
	}
	if err := c.Await(ctx, "a\nb"); !errors.Is(err, ErrName) {
		t.Fatalf("await of a bad name: %v", err)
	}
	if _, _, err := c.TryAwait(ctx, "b", -time.Millisecond); !errors.Is(err, ErrArgs) {
		t.Fatalf("tryawait with a negative wait: %v", err)
	}
	if _, _, err := c.TryAwait(ctx, "b", (NumMax+1)*time.Millisecond); !errors.Is(err, ErrArgs) {
		t.Fatalf("tryawait with a wait above NumMax ms: %v", err)
	}
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TRYAWAIT: OK 0 is open, TIMEOUT <count> is the count (no error), the
// wait rounded up to whole ms, 0 sent as 0 (one look).
func TestFakeTryAwait(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "TRYAWAIT b 2", "TIMEOUT 3")
	n, ok, err := c.TryAwait(ctx, "b", 1500*time.Microsecond)
	if err != nil || ok || n != 3 {
		t.Fatalf("tryawait that ran out: %d %v %v", n, ok, err)
	}
	go f.serve(t, "TRYAWAIT b 0", "OK 0")
	if n, ok, err = c.TryAwait(ctx, "b", 0); err != nil || !ok || n != 0 {
		t.Fatalf("tryawait of an open latch: %d %v %v", n, ok, err)
	}
	go f.serve(t, "TRYAWAIT b 0", "TIMEOUT x")
	if _, _, err = c.TryAwait(ctx, "b", 0); !errors.Is(err, ErrProtocol) {
		t.Fatalf("TIMEOUT x: %v", err)
	}
	go f.serve(t, "AWAIT b", "TIMEOUT 1")
	if err = c.Await(ctx, "b"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("AWAIT answered TIMEOUT: %v", err)
	}
}

// Many goroutines await on one client at once, each under its own tag,
// and each returns when its own reply comes, whatever the order.
func TestFakeAwaitMany(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	const n = 6
	res := make(chan string, n)
	for i := 0; i < n; i++ {
		name := "l" + strconv.Itoa(i%2) // two latches, three waits each
		go func() {
			if err := c.Await(ctx, name); err != nil {
				res <- name + ": " + err.Error()
				return
			}
			res <- name
		}()
	}
	tags := map[string]string{}
	for len(tags) < n {
		tag, req := f.next(t)
		if !strings.HasPrefix(req, "AWAIT l") {
			t.Fatalf("fake read %q", req)
		}
		tags[tag] = req[len("AWAIT "):]
	}
	for tag, name := range tags { // l1's three first
		if name == "l1" {
			f.reply(t, tag, "OK 0")
		}
	}
	for i := 0; i < 3; i++ {
		if got := <-res; got != "l1" {
			t.Fatalf("got %q, want l1 (l0 is not answered yet)", got)
		}
	}
	for tag, name := range tags {
		if name == "l0" {
			f.reply(t, tag, "OK 0")
		}
	}
	for i := 0; i < 3; i++ {
		if got := <-res; got != "l0" {
			t.Fatalf("got %q, want l0", got)
		}
	}
}

// A cancelled Await is withdrawn with CANCEL #tag and returns
// ErrCancelled; an OK 0 that raced the CANCEL needs no undo (nothing is
// held): no other line follows, and another wait is undisturbed.
func TestFakeAwaitCancel(t *testing.T) {
	c, f := newFake(t)
	for _, raced := range []bool{false, true} {
		ctx, cancel := context.WithCancel(guard(t))
		res := make(chan error, 1)
		go func() { res <- c.Await(ctx, "b") }()
		ta := f.expect(t, "AWAIT b")
		other := make(chan error, 1)
		go func() {
			_, _, err := c.TryAwait(guard(t), "o", time.Minute)
			other <- err
		}()
		to := f.expect(t, "TRYAWAIT o 60000")
		cancel()
		tc := f.expect(t, "CANCEL #"+ta)
		if raced {
			f.send(t, "#"+ta+" OK 0", "#"+tc+" OK 0")
		} else {
			f.send(t, "#"+ta+" ERR CANCELLED withdrawn", "#"+tc+" OK 1")
		}
		if err := <-res; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("raced %v: await: %v", raced, err)
		}
		f.reply(t, to, "OK 0")
		if err := <-other; err != nil {
			t.Fatalf("raced %v: the other wait: %v", raced, err)
		}
		go f.serve(t, "PING", "OK PONG") // nothing came between: no release of anything
		if err := c.Ping(guard(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// The connection ending fails a waiting Await at once with ErrClosed.
func TestFakeAwaitClosed(t *testing.T) {
	c, f := newFake(t)
	res := make(chan error, 1)
	go func() { res <- c.Await(guard(t), "b") }()
	f.expect(t, "AWAIT b")
	f.conn.Close()
	select {
	case err := <-res:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("await: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("await did not fail when the connection ended")
	}
}
