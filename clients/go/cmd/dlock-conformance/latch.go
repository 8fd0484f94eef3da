// The conformance adapter's count-down latch commands: latchset, countdown, latchcount, await, tryawait.
// SPDX-License-Identifier: MIT

package main

import (
	"context"
	"strconv"
	"time"

	dlock "github.com/dlockd/dlockd/clients/go"
)

// latch: "latchset <cid> <name> <count>" answers ok 1 or ok 0; "countdown"
// and "latchcount <cid> <name>" ok <count>; "await <cid> <name>" ok;
// "tryawait <cid> <name> <wait>" ok, or timeout <count>.
func (a *adapter) latch(ctx context.Context, cmd string, args []string) (string, error) {
	n := 2
	if cmd == "latchset" || cmd == "tryawait" {
		n = 3
	}
	if err := need(args, n); err != nil {
		return "", err
	}
	c, err := a.client(args[0])
	if err != nil {
		return "", err
	}
	name := args[1]
	switch cmd {
	case "latchset":
		count, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return "", &dlock.Error{Code: "ARGS", Text: "count " + strconv.Quote(args[2]) + " is not a number"}
		}
		set, err := c.LatchSet(ctx, name, count)
		if err != nil {
			return "", err
		}
		if set {
			return "ok 1", nil
		}
		return "ok 0", nil
	case "countdown", "latchcount":
		var left int64
		if cmd == "countdown" {
			left, err = c.CountDown(ctx, name)
		} else {
			left, err = c.LatchCount(ctx, name)
		}
		if err != nil {
			return "", err
		}
		return "ok " + strconv.FormatInt(left, 10), nil
	case "await":
		if err := c.Await(ctx, name); err != nil {
			return "", err
		}
		return "ok", nil
	}
	wait, err := num(args[2])
	if err != nil {
		return "", err
	}
	count, open, err := c.TryAwait(ctx, name, time.Duration(wait)*time.Millisecond)
	if err != nil {
		return "", err
	}
	if open {
		return "ok", nil
	}
	return "timeout " + strconv.FormatInt(count, 10), nil
}
