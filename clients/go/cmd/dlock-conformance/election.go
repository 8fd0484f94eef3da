// dlock-conformance: the election commands (elect, resign, leader, observe, unobserve).
// SPDX-License-Identifier: MIT

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	dlock "github.com/dlockd/dlockd/clients/go"
)

func leaderWords(ch dlock.LeaderChange) string {
	if ch.None {
		return "NONE"
	}
	return strconv.FormatUint(ch.Fence, 10) + " " + ch.Value
}

func (a *adapter) election(ctx context.Context, cmd string, args []string) (string, error) {
	switch cmd {
	case "elect": // <cid> <hid> <name> <value> <lease>
		if err := need(args, 5); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		lease, err := msOpt(args[4])
		if err != nil {
			return "", err
		}
		l, err := c.Elect(ctx, args[2], args[3], lease)
		if err != nil {
			return "", err
		}
		a.keepHandle(args[1], &handle{cid: args[0], lead: l, watched: make(chan struct{})})
		return "ok " + strconv.FormatUint(l.Fence(), 10), nil
	case "resign": // <hid>
		if err := need(args, 1); err != nil {
			return "", err
		}
		h, err := a.handle(args[0])
		if err != nil {
			return "", err
		}
		if h.lead == nil {
			return "", fmt.Errorf("%w: %s is not a leadership", errUsage, args[0])
		}
		err = h.lead.Resign()
		switch {
		case err == nil:
			return "ok 1", nil
		case errors.Is(err, dlock.ErrClosed):
			return "", err
		case errors.Is(err, dlock.ErrNotHeld), errors.Is(err, dlock.ErrLost):
			return "ok 0", nil
		}
		return "", err
	case "leader": // <cid> <name>
		if err := need(args, 2); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		ld, ok, err := c.Leader(ctx, args[1])
		if err != nil {
			return "", err
		}
		return "ok " + leaderWords(dlock.LeaderChange{Leader: ld, None: !ok}), nil
	case "observe": // <cid> <oid> <name>
		if err := need(args, 3); err != nil {
			return "", err
		}
		return a.observe(ctx, args[0], args[1], args[2])
	case "unobserve": // <oid>
		if err := need(args, 1); err != nil {
			return "", err
		}
		a.mu.Lock()
		o := a.obs[args[0]]
		delete(a.obs, args[0])
		a.mu.Unlock()
		if o == nil {
			return "", fmt.Errorf("%w: no observation %s", errUsage, args[0])
		}
		o.obs.Close()
		<-o.watched // its last "* leader" line is out before "ok"
		return "ok", nil
	}
	return "", fmt.Errorf("%w: unknown command %s", errUsage, cmd)
}

// observe answers the leader now (the observation's first change), and
// writes every later change as "* leader <oid> …" once the answer is out.
// The observation outlives the command: only a cancel while OBSERVE is
// pending ends it.
func (a *adapter) observe(ctx context.Context, cid, oid, name string) (string, error) {
	c, err := a.client(cid)
	if err != nil {
		return "", err
	}
	octx, ocancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-returned: // the command answered: its context ends, not the observation
			default:
				ocancel()
			}
		case <-returned:
		}
	}()
	defer close(returned)
	o, err := c.Observe(octx, name)
	if err != nil {
		ocancel()
		return "", err
	}
	var first dlock.LeaderChange
	select {
	case ch, ok := <-o.Changes():
		if !ok {
			ocancel()
			return "", o.Err()
		}
		first = ch
	case <-time.After(time.Minute): // a hang guard: the first change is already queued
		ocancel()
		return "", errors.New("no first change")
	}
	ob := &observation{obs: o, watched: make(chan struct{})}
	a.mu.Lock()
	a.obs[oid] = ob
	a.after[a.ridOf(ctx)] = func() {
		go func() {
			defer close(ob.watched)
			defer ocancel()
			for ch := range o.Changes() {
				a.emit("* leader " + oid + " " + leaderWords(ch))
			}
		}()
	}
	a.mu.Unlock()
	return "ok " + leaderWords(first), nil
}
