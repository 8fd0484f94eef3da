// Package documentation.
// SPDX-License-Identifier: MIT

// Package dlock is a Go client for dlockd, the lock-manager daemon that
// keeps Redisson-compatible locks in Redis. Standard library only. Its
// module is clients/go of the dlockd repository:
//
//	import dlock "github.com/dlockd/dlockd/clients/go"
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
// Count-down latches: LatchSet sets a latch's count once, CountDown takes
// one off it, Await waits (TryAwait within a wait) until it is 0, on any
// dlockd or Redisson's RCountDownLatch of the name. A latch has no holder:
// the client holds nothing of it, and nothing of it is lost.
//
//	_, err = c.LatchSet(ctx, "batch-17", 3) // false: it was set already
//	left, err := c.CountDown(ctx, "batch-17") // each of three workers, when done
//	err = c.Await(ctx, "batch-17")            // whoever waits for all three
//
// Loss: dlockd tells a client when it can no longer vouch for a lock
// (lease ran out, FORCEUNLOCK, Redis unreachable); the handle's Context is
// then cancelled and Err returns a *LostError with the reason. When the
// connection ends every handle is lost with reason "closed", and every
// pending call fails at once with ErrClosed.
//
// Cancellation: every call that may wait takes a context. When it ends,
// a goroutine still waiting in the client for a name's turn gives up its
// place, and a request in dlockd is withdrawn (CANCEL #<its tag>); if the
// grant raced the cancel, the client releases it before the call returns.
// The call returns ErrCancelled (which wraps ctx.Err()), nothing stays
// held, and the client's other requests go on undisturbed.
//
// Any number of goroutines may wait at once on one Client: every request
// goes out tagged (#<tag>), dlockd serves it as soon as it reads it and
// answers when it is ready, and the client hands each answer to the
// goroutine that asked. A wait holds back no other request of the client;
// ending one goroutine's ctx withdraws its request alone (CANCEL #<tag>).
//
//	for _, job := range jobs { // 100 goroutines, one connection
//		go func(job string) {
//			l, err := c.Lock(ctx, "job-"+job)
//			if err != nil { ... }
//			defer l.Unlock()
//			run(l.Context(), job)
//		}(job)
//	}
package dlock
