// Tests against a scripted fake dlockd: the races a real daemon makes hard to hit.
// SPDX-License-Identifier: MIT

package dlock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
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

// next reads the client's next request: its tag and the request after it.
// Every request of the client is tagged.
func (f *fake) next(t *testing.T) (tag, req string) {
	t.Helper()
	select {
	case got, ok := <-f.lines:
		if !ok {
			t.Fatal("the client closed the connection")
		}
		tag, req, ok = cutTag(got)
		if !ok {
			t.Fatalf("fake read %q: not a tagged request", got)
		}
		return tag, req
	case <-time.After(hangGuard):
		t.Fatal("fake got no request")
	}
	return "", ""
}

// cutTag splits "#<tag> <request>", checking the tag's form.
func cutTag(line string) (tag, req string, ok bool) {
	if !strings.HasPrefix(line, "#") {
		return "", "", false
	}
	tag, req, ok = strings.Cut(line[1:], " ")
	if !ok || len(tag) < 1 || len(tag) > 16 {
		return "", "", false
	}
	for _, ch := range tag {
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '_' || ch == '-') {
			return "", "", false
		}
	}
	return tag, req, true
}

// expect reads the next request, which must be want; it returns its tag.
func (f *fake) expect(t *testing.T, want string) string {
	t.Helper()
	tag, got := f.next(t)
	if got != want {
		t.Fatalf("fake read %q, want %q", got, want)
	}
	return tag
}

// tagged is lines as the reply to tag: each line tagged, but events
// ("!…") and a LIST block's entries ("= …").
func tagged(tag string, lines []string) []byte {
	var b []byte
	for _, l := range lines {
		if !strings.HasPrefix(l, "!") && !strings.HasPrefix(l, "= ") {
			b = append(b, "#"+tag+" "...)
		}
		b = append(b, l+"\n"...)
	}
	return b
}

// reply answers the request tagged tag with lines (see tagged).
func (f *fake) reply(t *testing.T, tag string, lines ...string) {
	t.Helper()
	if _, err := f.conn.Write(tagged(tag, lines)); err != nil {
		t.Fatal(err)
	}
}

// serve, for a goroutine of the test: reads want, then answers replies
// (see tagged).
func (f *fake) serve(t *testing.T, want string, replies ...string) {
	var line string
	select {
	case line = <-f.lines:
	case <-time.After(hangGuard):
		t.Errorf("fake did not get %q", want)
		return
	}
	tag, got, ok := cutTag(line)
	if !ok || got != want {
		t.Errorf("fake read %q, want #<tag> %q", line, want)
		return
	}
	if _, err := f.conn.Write(tagged(tag, replies)); err != nil {
		t.Error(err)
	}
}

// send writes lines as they are.
func (f *fake) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := f.conn.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
}

// The grant raced the CANCEL (#t OK …, then the CANCEL's OK 0): the
// client releases the lock it got before the call returns ErrCancelled,
// and another goroutine's wait in progress meanwhile is undisturbed.
func TestFakeGrantRacesCancel(t *testing.T) {
	c, f := newFake(t)
	ctx, cancel := context.WithCancel(guard(t))
	res := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, "x")
		res <- err
	}()
	tx := f.expect(t, "LOCK x")
	other := make(chan *Lock, 1)
	go func() {
		l, err := c.Lock(guard(t), "y")
		if err != nil {
			t.Error(err)
		}
		other <- l
	}()
	ty := f.expect(t, "LOCK y")
	cancel()
	tc := f.expect(t, "CANCEL #"+tx)
	if tc == tx || tc == ty {
		t.Fatalf("CANCEL tagged %q, a tag in progress", tc)
	}
	f.send(t, "#"+tx+" OK 7 1", "#"+tc+" OK 0")
	tu := f.expect(t, "UNLOCK x")
	select {
	case err := <-res:
		t.Fatalf("the cancelled Lock returned (%v) before its raced grant was released", err)
	default:
	}
	f.reply(t, tu, "OK 0")
	if err := <-res; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("lock: %v", err)
	}
	f.reply(t, ty, "OK 8 1")
	if l := <-other; l == nil || l.Fence() != 8 {
		t.Fatalf("the other wait: %+v", l)
	}
	go f.serve(t, "PING", "OK PONG")
	if err := c.Ping(guard(t)); err != nil {
		t.Fatal(err)
	}
}

// CANCEL answered the dlockd way: #t ERR CANCELLED, then the CANCEL's OK 1.
func TestFakeCancelled(t *testing.T) {
	c, f := newFake(t)
	ctx, cancel := context.WithCancel(guard(t))
	res := make(chan error, 1)
	go func() {
		_, err := c.TryLock(ctx, "y", time.Minute, WithLease(2*time.Second))
		res <- err
	}()
	ty := f.expect(t, "TRYLOCK y 60000 2000")
	cancel()
	tc := f.expect(t, "CANCEL #"+ty)
	f.send(t, "#"+ty+" ERR CANCELLED withdrawn", "#"+tc+" OK 1")
	if err := <-res; !errors.Is(err, ErrCancelled) {
		t.Fatalf("trylock: %v", err)
	}
}

// A !LOST between a grant and the next reply reaches the handle the grant
// made, and a reentry granted after the loss is not the handle's.
func TestFakeLostAndStaleReentry(t *testing.T) {
	c, f := newFake(t)
	ctx := guard(t)
	go f.serve(t, "LOCK z", "OK 9 1", "!LOST z expired")
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
