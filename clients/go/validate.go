// Local checks of names and numbers, with the daemon's rules, and the lease option.
// SPDX-License-Identifier: MIT

package dlock

import (
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
	shown := name
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return &Error{Code: "NAME", Text: "bad lock name " + strconv.Quote(shown) +
		": 1 to 255 bytes of printable ASCII without spaces"}
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
// connection lives.
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
