// Package documentation.
// SPDX-License-Identifier: MIT

// Package dlock is a Go client for dlockd, the lock-manager daemon that
// keeps Redisson-compatible locks in Redis. Standard library only.
//
// A Client is one connection to dlockd's Unix socket and one lock owner:
// dlockd counts holds per connection, and when the connection ends (Close,
// the process dies) every lock it held is released. Many goroutines may
// share a Client; the client keeps two of them from holding one name at
// once (a per-name FIFO for plain, fair and write locks; read locks are
// shared).
//
//	c, err := dlock.DialDefault(ctx) // $DLOCK_SOCKET, else /run/dlockd/dlockd.sock
//	if err != nil { ... }
//	defer c.Close()
//
//	l, err := c.Lock(ctx, "invoices")
//	if err != nil { ... }
//	defer l.Unlock()
//	err = work(l.Context(), l.Fence()) // l.Context() ends if the lock is lost
//
// Several names at once: MultiLock takes a set of plain locks all or
// nothing (MLOCK), without holding part of it while it waits, and returns
// a *MultiHold (Fences; Unlock releases the set; its Context ends when
// any name is lost).
//
// Leader election: Elect campaigns for a name and returns a *Leadership
// once the client leads (its Context ends on loss; Resign hands over);
// Leader tells who leads; Observe streams every change of leader on a
// channel, in fence order.
//
// Loss: dlockd tells a client when it can no longer vouch for a lock
// (lease ran out, FORCEUNLOCK, Redis unreachable); the handle's Context is
// then cancelled and Err returns a *LostError with the reason. When the
// connection ends every handle is lost with reason "closed", and every
// pending call fails at once with ErrClosed.
//
// Cancellation: every call that may wait takes a context. When it ends,
// a request still queued in the client is dropped and one waiting in
// dlockd is withdrawn (CANCEL); if the grant raced the cancel, the client
// releases it. The call returns ErrCancelled (which wraps ctx.Err()), and
// nothing stays held.
//
// dlockd serves one request of a connection at a time, so while a request
// of the client waits in dlockd (a Lock of a lock that is taken, a Try…
// with a wait), the client's other requests wait behind it until it is
// granted, times out or is cancelled. Lock, RLock, WLock, FairLock and
// Acquire first try without waiting (a request that pipelines with the
// others) and wait only when that finds the lock taken. Give goroutines
// that wait independently clients of their own.
package dlock
