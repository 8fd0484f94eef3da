// STATUS, PING, INFO and FORCEUNLOCK.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Status is a name's STATUS as dlockd answered it.
type Status struct {
	// State: "FREE"; "MINE" (a plain or fair lock this connection holds);
	// "TAKEN" (held by another); "READ" or "WRITE" (a read/write lock);
	// "SEM" (a semaphore).
	State     string
	Holds     int           // this connection's holds (MINE, READ, WRITE) or permits (SEM)
	TTL       time.Duration // remaining lease (MINE, TAKEN, READ, WRITE); negative when unknown
	Fence     uint64        // this connection's fence (MINE)
	Readers   int           // owners with read holds (READ), 1 (WRITE)
	Available int           // permits free now (SEM)
}

// String gives the words of dlockd's reply after OK, e.g. "MINE 1 29998 17".
func (s Status) String() string {
	ms := strconv.FormatInt(s.TTL.Milliseconds(), 10)
	switch s.State {
	case "MINE":
		return "MINE " + strconv.Itoa(s.Holds) + " " + ms + " " + strconv.FormatUint(s.Fence, 10)
	case "TAKEN":
		return "TAKEN " + ms
	case "READ", "WRITE":
		return s.State + " " + strconv.Itoa(s.Readers) + " " + strconv.Itoa(s.Holds) + " " + ms
	case "SEM":
		return "SEM " + strconv.Itoa(s.Available) + " " + strconv.Itoa(s.Holds)
	}
	return s.State
}

// Status asks dlockd about name.
func (c *Client) Status(ctx context.Context, name string) (Status, error) {
	if err := checkName(name); err != nil {
		return Status{}, err
	}
	words, err := c.simple(ctx, "STATUS "+name)
	if err != nil {
		return Status{}, err
	}
	return parseStatus(words)
}

func parseStatus(words string) (Status, error) {
	w := strings.Fields(words)
	bad := func() (Status, error) { return Status{}, protoError("STATUS answered OK " + words) }
	if len(w) == 0 {
		return bad()
	}
	n := make([]int64, len(w)-1)
	for i := range n {
		v, err := strconv.ParseInt(w[i+1], 10, 64)
		if err != nil {
			return bad()
		}
		n[i] = v
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	s := Status{State: w[0]}
	switch {
	case s.State == "FREE" && len(n) == 0:
	case s.State == "MINE" && len(n) == 3:
		s.Holds, s.TTL, s.Fence = int(n[0]), ms(n[1]), uint64(n[2])
	case s.State == "TAKEN" && len(n) == 1:
		s.TTL = ms(n[0])
	case (s.State == "READ" || s.State == "WRITE") && len(n) == 3:
		s.Readers, s.Holds, s.TTL = int(n[0]), int(n[1]), ms(n[2])
	case s.State == "SEM" && len(n) == 2:
		s.Available, s.Holds = int(n[0]), int(n[1])
	default:
		return bad()
	}
	return s, nil
}

// Ping checks that dlockd answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.simple(ctx, "PING")
	return err
}

// Info returns dlockd's INFO keys (version, redis, connections, ...).
func (c *Client) Info(ctx context.Context) (map[string]string, error) {
	words, err := c.simple(ctx, "INFO")
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for _, kv := range strings.Fields(words) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

// ForceUnlock removes name's lock whoever holds it (admins only: else
// ErrDenied); its holders are told ReasonForced. True if one was removed.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	words, err := c.simple(ctx, "FORCEUNLOCK "+name)
	if err != nil {
		return false, err
	}
	return words == "1", nil
}
