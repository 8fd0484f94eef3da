// Observing an election: OBSERVE, its !LEADER events on a channel, UNOBSERVE.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
)

// LeaderChange is what an Observation tells: a (new) leader, or None.
type LeaderChange struct {
	Leader      // the leader (zero when None)
	None   bool // nobody leads, or dlockd cannot tell (Redis out of reach longer than a lease)
}

// Observation streams the leaders of one name: Changes gives the leader
// at the time of Observe first, then every change, in the order dlockd
// told them. The fences told rise strictly; the same leader is told again
// only after a None came between. Close it (or end Observe's context)
// when done.
type Observation struct {
	c    *Client
	name string
	ch   chan LeaderChange
	done chan struct{} // closed when the observation ends
	wake chan struct{} // the pump's doorbell (capacity 1)
	pump chan struct{} // closed when the pump has closed ch

	// guarded by c.mu
	queue  []LeaderChange // told by dlockd, not yet taken from ch
	active bool           // OBSERVE was answered: events reach it
	ended  bool
	err    error
}

// observed is the client's count of live observations per name: OBSERVE
// goes out for each (dlockd does not double the events), UNOBSERVE when
// the last ends.
type observed struct {
	count  int
	active []*Observation
}

// Observe starts observing the election name: its OBSERVE answer (the
// leader now) is the first value of Changes, and every later change
// follows, until Close, until ctx ends, or until the connection ends
// (Changes is then closed and Err says why). Changes are queued in the
// client without bound, so a slow reader of Changes holds nothing back.
func (c *Client) Observe(ctx context.Context, name string) (*Observation, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	o := &Observation{c: c, name: name, ch: make(chan LeaderChange), done: make(chan struct{}),
		wake: make(chan struct{}, 1), pump: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, closedError(nil)
	}
	ob := c.observers[name]
	if ob == nil {
		ob = &observed{}
		c.observers[name] = ob
	}
	ob.count++
	c.mu.Unlock()
	go o.run()

	cl := newCall("OBSERVE "+name, false)
	cl.obs = o
	err := c.do(ctx, cl)
	if err == nil {
		switch {
		case cl.err != nil:
			err = cl.err
		case o.isActive():
			go func() {
				select {
				case <-ctx.Done():
					o.end(cancelError(ctx))
				case <-o.done:
				}
			}()
			return o, nil
		default:
			err = replyError(cl.reply)
		}
	}
	o.end(err)
	<-o.pump
	return nil, err
}

func (o *Observation) isActive() bool {
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	return o.active
}

// observedLocked runs in the reader on the OK of an OBSERVE: the answer
// is the first change, and the events read after it reach o.
func (c *Client) observedLocked(cl *call) {
	o := cl.obs
	ch, err := parseLeader(cl.reply[3:])
	if err != nil {
		cl.err = err
		return
	}
	if o.ended {
		return
	}
	o.active = true
	c.observers[o.name].active = append(c.observers[o.name].active, o)
	o.pushLocked(ch)
}

// leaderEventLocked hands "!LEADER <name> <fence> <value>|NONE" to the
// name's observations.
func (c *Client) leaderEventLocked(name, rest string) {
	ob := c.observers[name]
	if ob == nil || len(ob.active) == 0 {
		return
	}
	ch, err := parseLeader(rest)
	if err != nil {
		return
	}
	for _, o := range ob.active {
		o.pushLocked(ch)
	}
}

func (o *Observation) pushLocked(ch LeaderChange) {
	o.queue = append(o.queue, ch)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run hands the queued changes to ch, in order, until the end.
func (o *Observation) run() {
	defer close(o.pump)
	defer close(o.ch)
	c := o.c
	for {
		c.mu.Lock()
		if len(o.queue) == 0 {
			c.mu.Unlock()
			select {
			case <-o.wake:
				continue
			case <-o.done:
				return
			}
		}
		next := o.queue[0]
		o.queue = o.queue[1:]
		c.mu.Unlock()
		select {
		case o.ch <- next:
		case <-o.done:
			return
		}
	}
}

// Name is the observed name.
func (o *Observation) Name() string { return o.name }

// Changes is the stream of leaders; it is closed when the observation
// ends.
func (o *Observation) Changes() <-chan LeaderChange { return o.ch }

// Done is closed when the observation ends.
func (o *Observation) Done() <-chan struct{} { return o.done }

// Err is nil while observing and after Close; ErrCancelled (wrapping
// ctx.Err()) after Observe's context ended; ErrClosed after the
// connection ended.
func (o *Observation) Err() error {
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	return o.err
}

// Close stops the observation (UNOBSERVE goes to dlockd once no other
// observation of the name on this client is left). Changes is closed when
// Close returns, and no change is received from it afterwards. It does not
// wait for dlockd's answer. Calling it again does nothing.
func (o *Observation) Close() error {
	o.end(nil)
	<-o.pump
	return nil
}

// end ends the observation with err (only the first end counts).
func (o *Observation) end(err error) {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	o.endLocked(err)
}

func (o *Observation) endLocked(err error) {
	if o.ended {
		return
	}
	o.ended, o.err, o.queue = true, err, nil
	close(o.done)
	c := o.c
	if c.closed {
		return
	}
	ob := c.observers[o.name]
	if ob == nil {
		return
	}
	for i, x := range ob.active {
		if x == o {
			ob.active = append(ob.active[:i], ob.active[i+1:]...)
			break
		}
	}
	if ob.count--; ob.count == 0 {
		delete(c.observers, o.name)
		c.sendLocked(newCall("UNOBSERVE "+o.name, false)) // nobody waits for its answer
	}
}
