// Tests of List against the real dlockd: a held lock's fence and holder, pattern, limit and more, bad input.
// SPDX-License-Identifier: MIT

package dlock

import (
	"errors"
	"os"
	"strconv"
	"testing"
)

func TestListHeldLock(t *testing.T) {
	c, other := dial(t), dial(t)
	ctx, name := guard(t), testName(t)
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	got, err := other.List(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got.More || len(got.Entries) != 1 {
		t.Fatalf("listing %+v", got)
	}
	e := got.Entries[0]
	if e.Name != name || e.Kind != "lock" || !e.HasFence || e.Fence != l.Fence() || e.Value != "" {
		t.Fatalf("entry %+v, fence %d", e, l.Fence())
	}
	if e.Holders.Total != 1 || len(e.Holders.List) != 1 || e.Waiters.Total != 0 {
		t.Fatalf("holders %+v waiters %+v", e.Holders, e.Waiters)
	}
	h := e.Holders.List[0]
	if h.PID != os.Getpid() || h.UID != os.Getuid() || h.Count != 1 || h.Host == "" || h.DlockdPID <= 0 || h.Age < 0 {
		t.Fatalf("holder %+v, pid %d", h, os.Getpid())
	}
	// A semaphore: no fence, its permits available as the value.
	sem := name + "-sem"
	if _, err := c.SemInit(ctx, sem, 3); err != nil {
		t.Fatal(err)
	}
	p, err := c.Acquire(ctx, sem, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(2)
	got, err = c.List(ctx, sem)
	if err != nil || len(got.Entries) != 1 {
		t.Fatalf("listing %+v %v", got, err)
	}
	if e := got.Entries[0]; e.Kind != "sem" || e.HasFence || e.Value != "1" || e.Holders.Total != 1 ||
		e.Holders.List[0].Count != 2 {
		t.Fatalf("semaphore entry %+v", e)
	}
}

func TestListPatternLimitMore(t *testing.T) {
	c := dial(t)
	ctx, prefix := guard(t), testName(t)
	for i := 0; i < 3; i++ {
		if _, err := c.Lock(ctx, prefix+"-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Lock(ctx, prefix+"x"); err != nil { // not matched by prefix-*
		t.Fatal(err)
	}
	all, err := c.List(ctx, prefix+"-*")
	if err != nil || all.More || len(all.Entries) != 3 {
		t.Fatalf("all: %+v %v", all, err)
	}
	for i, e := range all.Entries {
		if e.Name != prefix+"-"+strconv.Itoa(i) {
			t.Fatalf("entry %d is %q", i, e.Name)
		}
	}
	two, err := c.List(ctx, prefix+"-*", WithLimit(2))
	if err != nil || !two.More || len(two.Entries) != 2 {
		t.Fatalf("limit 2: %+v %v", two, err)
	}
	three, err := c.List(ctx, prefix+"-*", WithLimit(3))
	if err != nil || three.More || len(three.Entries) != 3 {
		t.Fatalf("limit 3: %+v %v", three, err)
	}
	none, err := c.List(ctx, prefix+"-nothing*")
	if err != nil || none.More || len(none.Entries) != 0 {
		t.Fatalf("no match: %+v %v", none, err)
	}
	// The connection reads on in step after counted replies.
	if st, err := c.Status(ctx, prefix+"-0"); err != nil || st.State != "MINE" {
		t.Fatalf("status after LIST: %v %v", st, err)
	}
}

func TestListBadArgs(t *testing.T) {
	c := dial(t)
	ctx := guard(t)
	for _, lim := range []int{0, ListMax + 1, -5} {
		if _, err := c.List(ctx, "*", WithLimit(lim)); !errors.Is(err, ErrArgs) {
			t.Fatalf("limit %d: %v", lim, err)
		}
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	for _, pat := range []string{string(long), "a b"} {
		if _, err := c.List(ctx, pat); !errors.Is(err, ErrArgs) {
			t.Fatalf("pattern %.20q: %v", pat, err)
		}
	}
	// dlockd's own check: the same error, and no desync.
	if _, err := c.simple(ctx, "LIST * 1001"); !errors.Is(err, ErrArgs) {
		t.Fatalf("daemon's limit check: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// A scripted reply: an event before the header, entries split across
// writes, and the next request's reply right behind them.
func TestListFraming(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "LIST j* 5", "!LOST other expired",
		"OK LIST 2 1\n= j1 lock -1 17 1,vm/10/20/1000/1/5 2,vm/10/21/1000/0/-,-/-/-/-/0/- -",
		"= j2 elect 900 3 1,-/-/-/-/1/- 0 -")
	got, err := c.List(ctx, "j*", WithLimit(5))
	if err != nil {
		t.Fatal(err)
	}
	if !got.More || len(got.Entries) != 2 {
		t.Fatalf("listing %+v", got)
	}
	e := got.Entries[0]
	if e.TTL >= 0 || e.Fence != 17 || e.Waiters.Total != 2 || len(e.Waiters.List) != 2 ||
		e.Waiters.List[0].Age >= 0 || e.Waiters.List[1].Host != "" || e.Waiters.List[1].PID != -1 ||
		e.Holders.List[0].PID != 20 || e.Holders.List[0].DlockdPID != 10 {
		t.Fatalf("entry %+v", e)
	}
	if e := got.Entries[1]; e.Kind != "elect" || e.Fence != 3 || e.Holders.List[0].Count != 1 || e.Value != "" {
		t.Fatalf("entry %+v", e)
	}
	go f.serve(t, "PING", "OK")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
