// Local checks of names and numbers, with the daemon's rules, and the lease option.
// SPDX-License-Identifier: MIT

package dlock

import (
	"fmt"
	"strconv"
	"time"
)

// Protocol limits (proto/PROTOCOL.md).
const (
	NameMax    = 255        // bytes in a lock name
	NumMax     = 2147483647 // largest number on the wire
	PermitsMax = 10000      // permits in one ACQUIRE or RELEASE
)

// ValidName reports whether name is a lock name dlockd accepts: 1 to 255
// bytes, each 0x21-0x7E.
func ValidName(name string) bool {
	if len(name) < 1 || len(name) > NameMax {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if ValidName(name) {
		return nil
	}
	return &Error{Code: "NAME", Text: badWord("bad lock name", name)}
}

// shownMax is how much of a bad name or value its error shows: the first
// 40 bytes of a longer one, then its length.
const shownMax = 40

// badWord is the error text for a bad name or leader value s (1 to 255
// bytes of 0x21-0x7E), worded as the other clients word it: what, s
// quoted and escaped, and what is wrong with it (bytes counted from 1).
func badWord(what, s string) string {
	shown := strconv.Quote(s)
	if len(s) > shownMax {
		shown = strconv.Quote(s[:shownMax]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
	}
	if len(s) < 1 || len(s) > NameMax {
		return what + " " + shown + ": must be 1 to " + strconv.Itoa(NameMax) + " bytes"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Sprintf("%s %s: only printable ASCII without spaces is allowed (byte %d is 0x%02X)",
				what, shown, i+1, s[i])
		}
	}
	return what + " " + shown
}

// millis converts d to whole milliseconds for the wire, rounding a
// positive fraction up (1µs is 1 ms, not 0 = "no lease").
func millis(what string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, &Error{Code: "ARGS", Text: what + " must not be negative"}
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	if ms > NumMax {
		return 0, &Error{Code: "ARGS", Text: what + " above " + strconv.Itoa(NumMax) + " ms"}
	}
	return ms, nil
}

func checkPermits(n int) error {
	if n < 1 || n > PermitsMax {
		return &Error{Code: "ARGS", Text: "permits are 1 to 10000, not " + strconv.Itoa(n)}
	}
	return nil
}

// Option tunes a grant (Lock, RLock, WLock, FairLock, Acquire and their
// Try… forms).
type Option func(*options)

type options struct {
	lease time.Duration
	held  []*Lock // MultiLock: locks the caller holds already
}

// WithLease gives the grant a lease: it ends lease after the grant unless
// renewed (Lock.Renew), and the handle reports ReasonExpired. Without it
// (or with 0) the lock is in watchdog mode: dlockd renews it while the
// connection lives. A fraction of a millisecond is rounded up: a lease
// below 1 ms is 1 ms, never 0.
func WithLease(lease time.Duration) Option {
	return func(o *options) { o.lease = lease }
}

// WithHeld tells MultiLock and TryMultiLock that the caller holds these
// plain locks already (of this client), so that their names in the set are
// taken as reentries (the hold's fence, one more wire hold, released by the
// set's Unlock) instead of waiting for the caller's own handles. Other
// grants ignore it, as MultiLock ignores locks of other names or kinds.
func WithHeld(locks ...*Lock) Option {
	return func(o *options) { o.held = append(o.held, locks...) }
}

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

func leaseOf(opts []Option) (int64, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return millis("lease", o.lease)
}
