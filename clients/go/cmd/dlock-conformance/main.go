// dlock-conformance: the Go client's adapter for tests/conformance (commands on stdin, answers on stdout).
// SPDX-License-Identifier: MIT

// Command dlock-conformance performs the conformance runner's commands
// (tests/conformance/README.md) through package dlock's public API only.
// Each command runs in its own goroutine; cancel ends that command's
// context.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	dlock "github.com/dlockd/dlockd/clients/go"
)

type handle struct {
	cid     string
	lock    *dlock.Lock
	permits *dlock.Permits
	lead    *dlock.Leadership
	multi   *dlock.MultiHold
	watched chan struct{} // closed when the loss watcher is done
}

type observation struct {
	obs     *dlock.Observation
	watched chan struct{} // closed when its watcher wrote its last line
}

type adapter struct {
	out     sync.Mutex
	w       *bufio.Writer
	mu      sync.Mutex
	clients map[string]*dlock.Client
	handles map[string]*handle
	cancels map[string]context.CancelFunc
	obs     map[string]*observation
	after   map[string]func() // run once the command's answer is written
	wg      sync.WaitGroup
}

func main() {
	a := &adapter{
		w:       bufio.NewWriter(os.Stdout),
		clients: map[string]*dlock.Client{},
		handles: map[string]*handle{},
		cancels: map[string]context.CancelFunc{},
		obs:     map[string]*observation{},
		after:   map[string]func(){},
	}
	a.emit("* ready")
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 1<<20)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) < 2 {
			continue
		}
		rid := words[0]
		if words[1] == "cancel" {
			if len(words) == 3 {
				a.mu.Lock()
				if cancel := a.cancels[words[2]]; cancel != nil {
					cancel()
				}
				a.mu.Unlock()
			}
			a.emit(rid + " ok")
			continue
		}
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ridKey{}, rid))
		a.mu.Lock()
		a.cancels[rid] = cancel
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			answer, err := a.run(ctx, words[1], words[2:])
			if err != nil {
				answer = "err " + errKind(err) + " " + strings.ReplaceAll(err.Error(), "\n", " ")
			}
			a.mu.Lock()
			delete(a.cancels, rid)
			after := a.after[rid]
			delete(a.after, rid)
			a.mu.Unlock()
			cancel()
			a.emit(strings.TrimRight(rid+" "+answer, " "))
			if after != nil {
				after()
			}
		}()
	}
	a.mu.Lock()
	clients := a.clients
	a.clients = map[string]*dlock.Client{}
	a.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	a.wg.Wait()
}

// ridKey keys the command's id in its context.
type ridKey struct{}

func (a *adapter) ridOf(ctx context.Context) string {
	rid, _ := ctx.Value(ridKey{}).(string)
	return rid
}

func (a *adapter) emit(line string) {
	a.out.Lock()
	defer a.out.Unlock()
	a.w.WriteString(line + "\n")
	a.w.Flush()
}

func errKind(err error) string {
	var ce *dlock.ConnectError
	switch {
	case errors.As(err, &ce):
		return "connect"
	case errors.Is(err, dlock.ErrCancelled):
		return "cancelled"
	case errors.Is(err, dlock.ErrClosed):
		return "closed"
	case errors.Is(err, dlock.ErrName):
		return "name"
	case errors.Is(err, dlock.ErrArgs):
		return "args"
	case errors.Is(err, dlock.ErrKind):
		return "kind"
	case errors.Is(err, dlock.ErrNotHeld):
		return "notheld"
	case errors.Is(err, dlock.ErrLimit):
		return "limit"
	case errors.Is(err, dlock.ErrDenied):
		return "denied"
	case errors.Is(err, dlock.ErrBackend):
		return "backend"
	}
	return "other"
}

var errUsage = errors.New("bad command")

func num(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a number", errUsage, s)
	}
	return n, nil
}

// msOpt is a <lease> in ms as dlock.WithLease: a whole number, or one with
// a fraction (below 1 ms too), passed as the exact nanoseconds for the
// client to round.
func msOpt(s string) (dlock.Option, error) {
	if strings.Contains(s, ".") {
		d, err := time.ParseDuration(s + "ms")
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a lease in ms", errUsage, s)
		}
		return dlock.WithLease(d), nil
	}
	n, err := num(s)
	return dlock.WithLease(time.Duration(n) * time.Millisecond), err
}

// nameArg is a lock's <name>: "%" and hex digits stand for the name's
// bytes ("%" alone is the empty name), for names a line cannot carry.
func nameArg(s string) (string, error) {
	if !strings.HasPrefix(s, "%") {
		return s, nil
	}
	b, err := hex.DecodeString(s[1:])
	if err != nil {
		return "", fmt.Errorf("%w: %q is not %%<hex>", errUsage, s)
	}
	return string(b), nil
}

func (a *adapter) client(cid string) (*dlock.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.clients[cid]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: no client %s", errUsage, cid)
}

func (a *adapter) handle(hid string) (*handle, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.handles[hid]; h != nil {
		return h, nil
	}
	return nil, fmt.Errorf("%w: no handle %s", errUsage, hid)
}

// keep records a grant's handle and reports its loss as "* lost".
func (a *adapter) keep(cid, hid string, l *dlock.Lock, p *dlock.Permits) {
	a.keepHandle(hid, &handle{cid: cid, lock: l, permits: p, watched: make(chan struct{})})
}

func (a *adapter) keepHandle(hid string, h *handle) {
	a.mu.Lock()
	a.handles[hid] = h
	a.mu.Unlock()
	done, errf := func() (<-chan struct{}, func() error) {
		switch {
		case h.lock != nil:
			return h.lock.Done(), h.lock.Err
		case h.lead != nil:
			return h.lead.Done(), h.lead.Err
		case h.multi != nil:
			return h.multi.Done(), h.multi.Err
		}
		return h.permits.Done(), h.permits.Err
	}()
	go func() {
		defer close(h.watched)
		<-done
		var lost *dlock.LostError
		if errors.As(errf(), &lost) {
			a.emit("* lost " + hid + " " + lost.Reason)
		}
	}()
}

func grantAnswer(l *dlock.Lock) string {
	return "ok " + strconv.FormatUint(l.Fence(), 10) + " " + strconv.Itoa(l.Holds())
}

func need(args []string, n int) error {
	if len(args) != n {
		return fmt.Errorf("%w: %d arguments, not %d", errUsage, n, len(args))
	}
	return nil
}

func (a *adapter) run(ctx context.Context, cmd string, args []string) (string, error) {
	switch cmd {
	case "connect":
		if err := need(args, 2); err != nil {
			return "", err
		}
		var c *dlock.Client
		var err error
		if args[1] == "-" {
			c, err = dlock.DialDefault(ctx)
		} else {
			c, err = dlock.Dial(ctx, args[1])
		}
		if err != nil {
			return "", err
		}
		a.mu.Lock()
		a.clients[args[0]] = c
		a.mu.Unlock()
		return "ok", nil
	case "close":
		if err := need(args, 1); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		c.Close()
		a.mu.Lock()
		var watched []chan struct{}
		for _, h := range a.handles {
			if h.cid == args[0] {
				watched = append(watched, h.watched)
			}
		}
		a.mu.Unlock()
		for _, w := range watched { // the "* lost" lines come before "ok"
			<-w
		}
		return "ok", nil
	case "lock", "rlock", "wlock", "fairlock", "trylock":
		n := 4
		if cmd == "trylock" {
			n = 5
		}
		if err := need(args, n); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		lease, err := msOpt(args[n-1])
		if err != nil {
			return "", err
		}
		name, err := nameArg(args[2])
		if err != nil {
			return "", err
		}
		var l *dlock.Lock
		switch cmd {
		case "lock":
			l, err = c.Lock(ctx, name, lease)
		case "rlock":
			l, err = c.RLock(ctx, name, lease)
		case "wlock":
			l, err = c.WLock(ctx, name, lease)
		case "fairlock":
			l, err = c.FairLock(ctx, name, lease)
		case "trylock":
			var wait int
			if wait, err = num(args[3]); err == nil {
				l, err = c.TryLock(ctx, name, time.Duration(wait)*time.Millisecond, lease)
				if errors.Is(err, dlock.ErrTimeout) {
					return "timeout", nil
				}
			}
		}
		if err != nil {
			return "", err
		}
		a.keep(args[0], args[1], l, nil)
		return grantAnswer(l), nil
	case "reenter", "unlock", "renew", "release":
		n := 1
		if cmd == "renew" || cmd == "release" {
			n = 2
		}
		if err := need(args, n); err != nil {
			return "", err
		}
		h, err := a.handle(args[0])
		if err != nil {
			return "", err
		}
		return a.onHandle(ctx, cmd, h, args)
	case "seminit":
		if err := need(args, 3); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		n, err := num(args[2])
		if err != nil {
			return "", err
		}
		set, err := c.SemInit(ctx, args[1], n)
		if err != nil {
			return "", err
		}
		if set {
			return "ok 1", nil
		}
		return "ok 0", nil
	case "acquire":
		if err := need(args, 5); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		n, err := num(args[3])
		if err != nil {
			return "", err
		}
		lease, err := msOpt(args[4])
		if err != nil {
			return "", err
		}
		p, err := c.Acquire(ctx, args[2], n, lease)
		if err != nil {
			return "", err
		}
		a.keep(args[0], args[1], nil, p)
		return "ok " + strconv.Itoa(p.Held()), nil
	case "status":
		if err := need(args, 2); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		st, err := c.Status(ctx, args[1])
		if err != nil {
			return "", err
		}
		return "ok " + st.String(), nil
	case "ping":
		if err := need(args, 1); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		return "ok", c.Ping(ctx)
	case "mlock", "trymlock", "munlock":
		return a.multi(ctx, cmd, args)
	case "latchset", "countdown", "latchcount", "await", "tryawait":
		return a.latch(ctx, cmd, args)
	case "list":
		return a.list(ctx, args)
	case "elect", "resign", "leader", "observe", "unobserve":
		return a.election(ctx, cmd, args)
	case "contend":
		if err := need(args, 5); err != nil {
			return "", err
		}
		c, err := a.client(args[0])
		if err != nil {
			return "", err
		}
		var n [3]int
		for i := range n {
			if n[i], err = num(args[1+i]); err != nil {
				return "", err
			}
		}
		return contend(ctx, c, n[0], n[1], n[2], args[4])
	}
	return "", fmt.Errorf("%w: unknown command %s", errUsage, cmd)
}

func (a *adapter) onHandle(ctx context.Context, cmd string, h *handle, args []string) (string, error) {
	if cmd == "release" {
		if h.permits == nil {
			return "", fmt.Errorf("%w: %s is not permits", errUsage, args[0])
		}
		n, err := num(args[1])
		if err != nil {
			return "", err
		}
		held, err := h.permits.Release(n)
		return "ok " + strconv.Itoa(held), err
	}
	if cmd == "renew" {
		lease, err := num(args[1])
		if err != nil {
			return "", err
		}
		var ttl time.Duration
		if h.lead != nil {
			ttl, err = h.lead.Renew(ctx, time.Duration(lease)*time.Millisecond)
		} else if h.lock != nil {
			ttl, err = h.lock.Renew(ctx, time.Duration(lease)*time.Millisecond)
		} else {
			ttl, err = h.permits.Renew(ctx, time.Duration(lease)*time.Millisecond)
		}
		return "ok " + strconv.FormatInt(ttl.Milliseconds(), 10), err
	}
	if h.lock == nil {
		return "", fmt.Errorf("%w: %s is not a lock", errUsage, args[0])
	}
	if cmd == "reenter" {
		if err := h.lock.Relock(ctx); err != nil {
			return "", err
		}
		return grantAnswer(h.lock), nil
	}
	if err := h.lock.Unlock(); err != nil {
		return "", err
	}
	return "ok " + strconv.Itoa(h.lock.Holds()), nil
}

// contend: tasks goroutines share c; task t, in round r, locks
// prefix<(t+r) mod names>, records the grant, yields and unlocks.
func contend(ctx context.Context, c *dlock.Client, tasks, names, rounds int, prefix string) (string, error) {
	var mu sync.Mutex
	holding := make([]int, names)
	last := make([]uint64, names)
	grants, overlaps, nonrising := 0, 0, 0
	var firstErr error
	var wg sync.WaitGroup
	for t := 0; t < tasks; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				k := (t + r) % names
				l, err := c.Lock(ctx, prefix+strconv.Itoa(k))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mu.Lock()
				grants++
				holding[k]++
				if holding[k] > 1 {
					overlaps++
				}
				if l.Fence() <= last[k] {
					nonrising++
				}
				last[k] = l.Fence()
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				holding[k]--
				mu.Unlock()
				if err := l.Unlock(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}(t)
	}
	wg.Wait()
	if firstErr != nil {
		return "", firstErr
	}
	return fmt.Sprintf("ok %d %d %d", grants, overlaps, nonrising), nil
}

// list: "ok <n> <more>" then, per entry, "<name> <kind> <fence> <holders_total>".
func (a *adapter) list(ctx context.Context, args []string) (string, error) {
	if err := need(args, 3); err != nil {
		return "", err
	}
	c, err := a.client(args[0])
	if err != nil {
		return "", err
	}
	var opts []dlock.ListOption
	if args[2] != "-" {
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return "", &dlock.Error{Code: "ARGS", Text: "limit " + strconv.Quote(args[2]) + " is not a number"}
		}
		opts = append(opts, dlock.WithLimit(n))
	}
	l, err := c.List(ctx, args[1], opts...)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("ok " + strconv.Itoa(len(l.Entries)))
	if l.More {
		b.WriteString(" 1")
	} else {
		b.WriteString(" 0")
	}
	for _, e := range l.Entries {
		fence := "-"
		if e.HasFence {
			fence = strconv.FormatUint(e.Fence, 10)
		}
		b.WriteString(" " + e.Name + " " + e.Kind + " " + fence + " " + strconv.Itoa(e.Holders.Total))
	}
	return b.String(), nil
}
