// A sync.Locker over one name of a client.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"sync"
)

// Locker adapts a plain lock of one client to sync.Locker. Goroutines of
// the process exclude each other through it as with a sync.Mutex, and
// processes through dlockd.
//
// The owner is the connection, not the goroutine: dlockd sees one owner
// per Client, and Unlock may be called from any goroutine, as with
// sync.Mutex.
//
// sync.Locker has no error path, so Lock waits as long as it takes and
// panics if it cannot get the lock (the client is closed or dlockd went
// away, the name is invalid or of another kind, Redis failed): returning
// without the lock would let the caller run unprotected. Unlock panics,
// as sync.Mutex does, when the Locker is not locked; an error of the
// release itself (the lock had been lost) is kept for Err. Handle gives
// the held *Lock, for its fence and loss signal.
type Locker struct {
	c    *Client
	name string
	mu   sync.Mutex
	held *Lock
	err  error
}

// Locker returns a sync.Locker for the plain lock name on this client.
func (c *Client) Locker(name string) *Locker {
	return &Locker{c: c, name: name}
}

// Lock takes the lock, waiting as long as it takes; it panics on failure.
func (k *Locker) Lock() {
	l, err := k.c.Lock(context.Background(), k.name)
	if err != nil {
		panic(err)
	}
	k.mu.Lock()
	k.held = l
	k.mu.Unlock()
}

// Unlock releases the lock; it panics if the Locker is not locked.
func (k *Locker) Unlock() {
	k.mu.Lock()
	l := k.held
	k.held = nil
	k.mu.Unlock()
	if l == nil {
		panic("dlock: Unlock of an unlocked Locker " + k.name)
	}
	err := l.Unlock()
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// Handle is the *Lock held now (its Fence, Context and Err), nil when the
// Locker is not locked.
func (k *Locker) Handle() *Lock {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held
}

// Err is the error of the last Unlock's release: nil, or why the lock was
// gone already (a *LostError).
func (k *Locker) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

var _ sync.Locker = (*Locker)(nil)
