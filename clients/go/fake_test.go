// Tests against a scripted fake dlockd: the races a real daemon makes hard to hit.
// SPDX-License-Identifier: MIT

package dlock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// fake accepts one connection and hands every line it reads to lines.
type fake struct {
	conn  net.Conn
	lines chan string
}

func newFake(t *testing.T) (*Client, *fake) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fake{lines: make(chan string, 64)}
	accepted := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		f.conn = conn
		close(accepted)
		r := bufio.NewScanner(conn)
		for r.Scan() {
			f.lines <- r.Text()
		}
		close(f.lines)
	}()
	c, err := Dial(guard(t), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitDone(t, "the fake's accept", accepted)
	t.Cleanup(func() { f.conn.Close() })
	return c, f
}

func (f *fake) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-f.lines:
		if got != want {
			t.Fatalf("fake read %q, want %q", got, want)
		}
	case <-time.After(hangGuard):
		t.Fatalf("fake did not get %q", want)
	}
}

// serve, for a goroutine of the test: reads want, then answers replies.
func (f *fake) serve(t *testing.T, want string, replies ...string) {
	select {
	case got := <-f.lines:
		if got != want {
			t.Errorf("fake read %q, want %q", got, want)
			return
		}
	case <-time.After(hangGuard):
		t.Errorf("fake did not get %q", want)
		return
	}
	for _, l := range replies {
		if _, err := f.conn.Write([]byte(l + "\n")); err != nil {
			t.Error(err)
		}
	}
}

func (f *fake) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := f.conn.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
}

// The grant raced the CANCEL (OK 0): the client releases the lock it got
// and the call fails with ErrCancelled.
func TestFakeGrantRacesCancel(t *testing.T) {
	c, f := newFake(t)
	ctx, cancel := context.WithCancel(guard(t))
	res := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, "x")
		res <- err
	}()
	f.expect(t, "TRYLOCK x 0")
	f.send(t, "TIMEOUT 500")
	f.expect(t, "LOCK x")
	// a request behind the waiting LOCK stays in the client meanwhile
	pctx, pcancel := context.WithCancel(guard(t))
	pres := make(chan error, 1)
	go func() { pres <- c.Ping(pctx) }()
	pcancel()
	if err := <-pres; !errors.Is(err, ErrCancelled) {
		t.Fatalf("queued ping: %v", err)
	}
	cancel()
	f.expect(t, "CANCEL")
	f.send(t, "OK 7 1", "OK 0")
	f.expect(t, "UNLOCK x")
	f.send(t, "OK 0")
	if err := <-res; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("lock: %v", err)
	}
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(guard(t)); err != nil {
		t.Fatal(err)
	}
}

// CANCEL answered the dlockd way: ERR CANCELLED, then OK 1.
func TestFakeCancelled(t *testing.T) {
	c, f := newFake(t)
	ctx, cancel := context.WithCancel(guard(t))
	res := make(chan error, 1)
	go func() {
		_, err := c.TryLock(ctx, "y", time.Minute, WithLease(2*time.Second))
		res <- err
	}()
	f.expect(t, "TRYLOCK y 60000 2000")
	cancel()
	f.expect(t, "CANCEL")
	f.send(t, "ERR CANCELLED withdrawn", "OK 1")
	if err := <-res; !errors.Is(err, ErrCancelled) {
		t.Fatalf("trylock: %v", err)
	}
}

// A !LOST between a grant and the next reply reaches the handle the grant
// made, and a reentry granted after the loss is not the handle's.
func TestFakeLostAndStaleReentry(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "TRYLOCK z 0", "OK 9 1", "!LOST z expired")
	l, err := c.Lock(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "the loss", l.Done())
	var lost *LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonExpired || l.Holds() != 0 {
		t.Fatalf("err %v holds %d", l.Err(), l.Holds())
	}
	if err := l.Relock(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("relock of a lost handle: %v", err)
	}
}
