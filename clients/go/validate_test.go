// Tests of the client's own checks: a bad name's error, a lease's rounding (issue 42).
// SPDX-License-Identifier: MIT

package dlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A bad name's error shows the name, worded as the Node, Python and Java
// clients word it, and nothing is sent.
func TestFakeBadNameShown(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	for _, tc := range []struct{ name, text string }{
		{"", `bad lock name "": must be 1 to 255 bytes`},
		{"a b", `bad lock name "a b": only printable ASCII without spaces is allowed (byte 2 is 0x20)`},
		{"tab\there", `bad lock name "tab\there": only printable ASCII without spaces is allowed (byte 4 is 0x09)`},
		{"caf\u00e9", `bad lock name "café": only printable ASCII without spaces is allowed (byte 4 is 0xC3)`},
		{"x\x01y", `bad lock name "x\x01y": only printable ASCII without spaces is allowed (byte 2 is 0x01)`},
		{strings.Repeat("x", 300), `bad lock name "` + strings.Repeat("x", 40) + `"... (300 bytes): must be 1 to 255 bytes`},
	} {
		_, err := c.Lock(ctx, tc.name)
		var e *Error
		if !errors.Is(err, ErrName) || !errors.As(err, &e) || e.Text != tc.text {
			t.Errorf("lock %q: %v\n want text %s", tc.name, err, tc.text)
		}
		if err != nil && err.Error() != "dlock: NAME: "+tc.text {
			t.Errorf("lock %q: Error() is %q", tc.name, err.Error())
		}
	}
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// A lease below 1 ms goes out as 1 ms, never as 0 (no lease: the
// watchdog's); a fraction above is rounded up too.
func TestFakeSubMsLease(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	for _, tc := range []struct {
		lease time.Duration
		wire  string
	}{
		{time.Nanosecond, "LOCK n 1"},
		{999999 * time.Nanosecond, "LOCK n 1"},
		{time.Millisecond, "LOCK n 1"},
		{time.Millisecond + time.Nanosecond, "LOCK n 2"},
		{1500 * time.Microsecond, "LOCK n 2"},
		{0, "LOCK n"},
	} {
		type grant struct {
			l   *Lock
			err error
		}
		got := make(chan grant, 1)
		go func(lease time.Duration) {
			l, err := c.Lock(ctx, "n", WithLease(lease))
			got <- grant{l, err}
		}(tc.lease)
		f.reply(t, f.expect(t, tc.wire), "OK 7 1")
		g := <-got
		if g.err != nil {
			t.Fatalf("lease %v: %v", tc.lease, g.err)
		}
		go f.serve(t, "UNLOCK n", "OK 0")
		if err := g.l.Unlock(); err != nil {
			t.Fatalf("lease %v: unlock: %v", tc.lease, err)
		}
	}
	if _, err := c.Lock(ctx, "n", WithLease(-time.Nanosecond)); !errors.Is(err, ErrArgs) {
		t.Fatalf("negative lease: %v", err)
	}
	if _, err := c.Lock(ctx, "n", WithLease(NumMax*time.Millisecond+time.Nanosecond)); !errors.Is(err, ErrArgs) {
		t.Fatalf("lease above %d ms: %v", NumMax, err)
	}
}
