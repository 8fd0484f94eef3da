// The adapter's multi-lock commands: mlock, trymlock, munlock.
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

// multi runs "mlock <cid> <hid> <lease> <names…>", "trymlock <cid> <hid>
// <wait> <lease> <names…>" and "munlock <hid>".
func (a *adapter) multi(ctx context.Context, cmd string, args []string) (string, error) {
	if cmd == "munlock" {
		if err := need(args, 1); err != nil {
			return "", err
		}
		h, err := a.handle(args[0])
		if err != nil {
			return "", err
		}
		if h.multi == nil {
			return "", fmt.Errorf("%w: %s is not a multi-lock", errUsage, args[0])
		}
		if err := h.multi.Unlock(); err != nil {
			return "", err
		}
		answer := "ok"
		for _, n := range h.multi.HoldsLeft() {
			answer += " " + strconv.Itoa(n)
		}
		return answer, nil
	}
	fixed := 3
	if cmd == "trymlock" {
		fixed = 4
	}
	if len(args) < fixed {
		return "", fmt.Errorf("%w: %d arguments, not at least %d", errUsage, len(args), fixed)
	}
	c, err := a.client(args[0])
	if err != nil {
		return "", err
	}
	leaseOpt, err := msOpt(args[fixed-1])
	if err != nil {
		return "", err
	}
	names := args[fixed:]
	// The runner's "holder locks again": this client's own locks of names
	// of the set are reentered, not waited for.
	a.mu.Lock()
	var held []*dlock.Lock
	for _, h := range a.handles {
		if h.cid == args[0] && h.lock != nil {
			held = append(held, h.lock)
		}
	}
	a.mu.Unlock()
	var m *dlock.MultiHold
	lease := []dlock.Option{leaseOpt, dlock.WithHeld(held...)}
	if cmd == "mlock" {
		m, err = c.MultiLock(ctx, names, lease...)
	} else {
		var wait int
		if wait, err = num(args[2]); err == nil {
			m, err = c.TryMultiLock(ctx, names, time.Duration(wait)*time.Millisecond, lease...)
			if errors.Is(err, dlock.ErrTimeout) {
				return "timeout", nil
			}
		}
	}
	if err != nil {
		return "", err
	}
	a.keepHandle(args[1], &handle{cid: args[0], multi: m, watched: make(chan struct{})})
	answer := "ok"
	for _, f := range m.Fences() {
		answer += " " + strconv.FormatUint(f, 10)
	}
	return answer, nil
}
