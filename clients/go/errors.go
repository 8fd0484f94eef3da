// Errors of the dlock client: dlockd's ERR codes, timeouts, losses, connect failures.
// SPDX-License-Identifier: MIT

package dlock

import (
	"errors"
	"strings"
	"syscall"
	"time"
)

// Error is an error dlockd answered (ERR <Code> <Text>), or one the client
// found itself with the same meaning (a bad name is ErrName before it is
// sent). Compare with errors.Is against the sentinels: errors.Is(err,
// dlock.ErrNotHeld).
type Error struct {
	Code string // NAME, ARGS, KIND, NOTHELD, LIMIT, DENIED, BACKEND, CANCELLED, CLOSED, UNKNOWN, TOOLONG, PROTOCOL
	Text string // for people; may change
	err  error  // what caused it, for Unwrap (context.Canceled, an I/O error)
}

func (e *Error) Error() string {
	if e.Text == "" {
		return "dlock: " + e.Code
	}
	return "dlock: " + e.Code + ": " + e.Text
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Text == "" && t.err == nil && t.Code == e.Code
}

// Unwrap returns the cause: ctx.Err() for ErrCancelled, the I/O error for
// ErrClosed when there was one.
func (e *Error) Unwrap() error { return e.err }

// Sentinels for errors.Is. Every *Error with that Code matches.
var (
	ErrName      = &Error{Code: "NAME"}      // invalid lock name
	ErrArgs      = &Error{Code: "ARGS"}      // a bad number or argument
	ErrKind      = &Error{Code: "KIND"}      // the name is another kind of lock
	ErrNotHeld   = &Error{Code: "NOTHELD"}   // not held by this connection (or handle)
	ErrLimit     = &Error{Code: "LIMIT"}     // a dlockd limit was reached
	ErrDenied    = &Error{Code: "DENIED"}    // not allowed for this peer
	ErrBackend   = &Error{Code: "BACKEND"}   // Redis unreachable or failing
	ErrCancelled = &Error{Code: "CANCELLED"} // the call's context ended first
	ErrClosed    = &Error{Code: "CLOSED"}    // the client is closed, or dlockd went away
	ErrUnknown   = &Error{Code: "UNKNOWN"}   // dlockd does not know the command
	ErrTooLong   = &Error{Code: "TOOLONG"}   // the request line was too long
	ErrProtocol  = &Error{Code: "PROTOCOL"}  // dlockd said something the client does not understand

	// ErrTimeout matches a *TimeoutError: a Try… call that did not get the
	// lock or permits within its wait.
	ErrTimeout = errors.New("dlock: timeout")
	// ErrLost matches a *LostError.
	ErrLost = errors.New("dlock: lock lost")
)

// TimeoutError is what a Try… call returns when its wait ran out. TTL is
// the holder's remaining lease as dlockd saw it, negative when not known.
type TimeoutError struct {
	Name string
	TTL  time.Duration
}

func (e *TimeoutError) Error() string {
	if e.TTL < 0 {
		return "dlock: " + e.Name + " not acquired within the wait"
	}
	return "dlock: " + e.Name + " not acquired within the wait (holder ttl " + e.TTL.String() + ")"
}

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Loss reasons of a LostError.
const (
	ReasonExpired = "expired" // the lease ran out
	ReasonForced  = "forced"  // someone ran FORCEUNLOCK
	ReasonBackend = "backend" // Redis was unreachable long enough that the lease may have run out
	ReasonClosed  = "closed"  // the connection ended: Close, or dlockd went away
)

// LostError says a handle's lock (or permits) is no longer held, and why.
type LostError struct {
	Name   string
	Reason string // ReasonExpired, ReasonForced, ReasonBackend or ReasonClosed
}

func (e *LostError) Error() string { return "dlock: lock " + e.Name + " lost: " + e.Reason }

// Is matches ErrLost, and ErrClosed when the reason is "closed".
func (e *LostError) Is(target error) bool {
	return target == ErrLost || (target == ErrClosed && e.Reason == ReasonClosed)
}

// ConnectError is Dial's error when the socket cannot be connected. Its
// message names the path and hints at the usual causes, as the C and
// Python clients do: "cannot connect to dlockd at /run/dlockd/dlockd.sock:
// No such file or directory (is dlockd running?)".
type ConnectError struct {
	Path string
	Err  error // the underlying error, often a syscall.Errno
}

func (e *ConnectError) Error() string {
	why, hint := "failed", ""
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		why = errno.Error()
		switch errno {
		case syscall.ENOENT, syscall.ECONNREFUSED:
			hint = " (is dlockd running?)"
		case syscall.EACCES:
			hint = " (add yourself to the dlockd group, or check socket_mode)"
		}
	} else if e.Err != nil {
		why = e.Err.Error()
	}
	if why != "" { // strerror's capital, as the C and Python clients print it
		why = strings.ToUpper(why[:1]) + why[1:]
	}
	return "cannot connect to dlockd at " + e.Path + ": " + why + hint
}

func (e *ConnectError) Unwrap() error { return e.Err }

// replyError turns "ERR <CODE> <text>" into an *Error.
func replyError(line string) error {
	rest := strings.TrimPrefix(line, "ERR ")
	code, text, _ := strings.Cut(rest, " ")
	return &Error{Code: code, Text: text}
}

func protoError(format string) error { return &Error{Code: "PROTOCOL", Text: format} }

func closedError(cause error) error {
	return &Error{Code: "CLOSED", Text: "connection to dlockd closed", err: cause}
}
