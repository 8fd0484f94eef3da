// Count-down latches: LATCHSET, COUNTDOWN, AWAIT/TRYAWAIT and LATCHCOUNT.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// LatchSet sets the count of the latch name to count (1 to NumMax) unless
// the latch exists: true if it set it now, false if it existed (its count
// unchanged), as Redisson's trySetCount.
func (c *Client) LatchSet(ctx context.Context, name string, count int64) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if count < 1 || count > NumMax {
		return false, &Error{Code: "ARGS", Text: "a latch's count is 1 to " + strconv.Itoa(NumMax) + ", not " + strconv.FormatInt(count, 10)}
	}
	n, err := c.latchWord(ctx, "LATCHSET "+name+" "+strconv.FormatInt(count, 10))
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// CountDown takes one off the latch's count and returns the count left.
// At 0 the latch is deleted and every waiter of it goes on. A latch that
// does not exist answers 0, and nothing changes.
func (c *Client) CountDown(ctx context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	return c.latchWord(ctx, "COUNTDOWN "+name)
}

// LatchCount is the latch's count now: 0 when it does not exist.
func (c *Client) LatchCount(ctx context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	return c.latchWord(ctx, "LATCHCOUNT "+name)
}

// Await waits until the latch's count is 0 (a latch that does not exist
// counts as 0: Await returns at once). When ctx ends first, the wait is
// withdrawn (CANCEL) and the error is ErrCancelled. Any number of the
// client's goroutines may wait at once, for one latch or several; their
// waits hold back no other request of the client.
func (c *Client) Await(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, open, err := c.awaitLatch(ctx, "AWAIT "+name)
	if err == nil && !open {
		err = protoError("AWAIT " + name + " answered TIMEOUT")
	}
	return err
}

// TryAwait is Await within wait (0: one look, no wait). ok is true once
// the count is 0; else count is the count when the wait ended, and err is
// nil: a latch still counting is no error.
func (c *Client) TryAwait(ctx context.Context, name string, wait time.Duration) (count int64, ok bool, err error) {
	if err := checkName(name); err != nil {
		return 0, false, err
	}
	ms, err := millis("wait", wait)
	if err != nil {
		return 0, false, err
	}
	return c.awaitLatch(ctx, "TRYAWAIT "+name+" "+strconv.FormatInt(ms, 10))
}

// awaitLatch sends an AWAIT or TRYAWAIT: (0, true) for OK 0, (count,
// false) for TIMEOUT <count>.
func (c *Client) awaitLatch(ctx context.Context, line string) (int64, bool, error) {
	cl := newCall(line, true)
	if err := c.do(ctx, cl); err != nil {
		return 0, false, err
	}
	switch {
	case cl.reply == "OK 0":
		return 0, true, nil
	case strings.HasPrefix(cl.reply, "TIMEOUT "):
		n, err := strconv.ParseInt(cl.reply[len("TIMEOUT "):], 10, 64)
		if err == nil && n >= 0 {
			return n, false, nil
		}
	case strings.HasPrefix(cl.reply, "ERR "):
		return 0, false, replyError(cl.reply)
	}
	return 0, false, protoError("unexpected reply to " + line + ": " + cl.reply)
}

// latchWord sends a request answered OK <n> (n >= 0) and returns n.
func (c *Client) latchWord(ctx context.Context, line string) (int64, error) {
	words, err := c.simple(ctx, line)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(words, 10, 64)
	if err != nil || n < 0 {
		return 0, protoError("unexpected reply to " + line + ": OK " + words)
	}
	return n, nil
}
