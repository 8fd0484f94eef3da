// Tagged requests against the scripted fake dlockd: tags, replies in any order, LIST blocks, bad replies.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
)

// Requests of many goroutines go out at once, each under a tag of its own;
// replies in any order reach the goroutine that asked. A tag in progress
// is never given again, even when the counter comes round to it.
func TestFakeTagsDistinct(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	const n = 8
	type res struct {
		i int
		l *Lock
	}
	got := make(chan res, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			l, err := c.Lock(ctx, "n"+strconv.Itoa(i))
			if err != nil {
				t.Error(err)
			}
			got <- res{i, l}
		}(i)
	}
	tags := map[string]string{} // tag -> request
	for len(tags) < n {
		tag, req := f.next(t)
		if prev, dup := tags[tag]; dup {
			t.Fatalf("tag %q given to %q while %q was in progress", tag, req, prev)
		}
		tags[tag] = req
	}
	for tag, req := range tags { // answered in map order: any order
		i, _ := strconv.Atoi(req[len("LOCK n"):])
		f.reply(t, tag, "OK "+strconv.Itoa(100+i)+" 1")
	}
	for k := 0; k < n; k++ {
		r := <-got
		if r.l == nil || r.l.Fence() != uint64(100+r.i) {
			t.Fatalf("lock %d got %+v", r.i, r.l)
		}
	}

	res1 := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, "w")
		res1 <- err
	}()
	tw := f.expect(t, "LOCK w")
	num, err := strconv.ParseUint(tw, 36, 64)
	if err != nil {
		t.Fatalf("tag %q is not the counter in base 36", tw)
	}
	c.mu.Lock()
	c.seq = num - 1 // the counter came round: its next value is tw, in progress
	c.mu.Unlock()
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	seq := c.seq
	c.seq = math.MaxUint64 // and wraps: 0 next
	c.mu.Unlock()
	if seq != num+1 {
		t.Fatalf("PING took tag %s; the one in progress is %s", strconv.FormatUint(seq, 36), tw)
	}
	st := make(chan error, 1)
	go func() {
		_, err := c.Status(ctx, "w")
		st <- err
	}()
	ts := f.expect(t, "STATUS w")
	if ts != "0" {
		t.Fatalf("after the counter wrapped, tag %q", ts)
	}
	f.reply(t, ts, "OK MINE 1 100 5")
	if err := <-st; err != nil {
		t.Fatal(err)
	}
	f.reply(t, tw, "OK 5 1")
	if err := <-res1; err != nil {
		t.Fatal(err)
	}
}

// A tagged LIST's block (tagged first line, then its entries whole) comes
// between the other replies and events; each reaches its own call.
func TestFakeTaggedListBlock(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	res := make(chan *Lock, 1)
	go func() {
		l, err := c.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		res <- l
	}()
	ta := f.expect(t, "LOCK a")
	lres := make(chan Listing, 1)
	go func() {
		ls, err := c.List(ctx, "*")
		if err != nil {
			t.Error(err)
		}
		lres <- ls
	}()
	tl := f.expect(t, "LIST *")
	f.reply(t, tl, "OK LIST 2 1",
		"= a lock 2000 3 1,h/1/2/3/1/5 0 -",
		"= b sem -1 - 0 0 4")
	f.send(t, "!LOST zz expired")
	f.reply(t, ta, "OK 4 1")
	ls := <-lres
	if len(ls.Entries) != 2 || !ls.More || ls.Entries[0].Name != "a" || ls.Entries[1].Value != "4" {
		t.Fatalf("listing %+v", ls)
	}
	if l := <-res; l == nil || l.Fence() != 4 {
		t.Fatalf("lock %+v", l)
	}
}

// An untagged reply (dlockd's ERR to a malformed tag) is the client's bug:
// every pending call fails with ErrProtocol, the client is closed, and the
// connection is dropped so that dlockd releases what it held.
func TestFakeUntaggedReplyFails(t *testing.T) {
	for _, bad := range []string{"ERR ARGS bad tag", "OK 1 1", "#", "#zz OK 1"} {
		t.Run(bad, func(t *testing.T) {
			c, f := newFake(t)
			ctx := guard(t)
			go f.serve(t, "LOCK held", "OK 1 1")
			held, err := c.Lock(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			go func() {
				_, err := c.Lock(ctx, "x")
				res <- err
			}()
			f.expect(t, "LOCK x")
			f.send(t, bad)
			if err := <-res; !errors.Is(err, ErrProtocol) {
				t.Fatalf("pending lock: %v", err)
			}
			if !errors.Is(held.Err(), ErrClosed) {
				t.Fatalf("held: %v", held.Err())
			}
			for range f.lines { // the client dropped the connection
			}
			if err := c.Ping(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("ping after: %v", err)
			}
		})
	}
}
