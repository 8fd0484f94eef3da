// LIST: the locks matching a pattern, read from dlockd's counted reply.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// ListMax is the largest limit LIST takes (PROTO_LIST_MAX); without
// WithLimit dlockd's default (100) applies.
const ListMax = 1000

// Listing is LIST's answer: the entries in dlockd's order, and More when
// more names matched than were told (raise the limit or narrow the
// pattern).
type Listing struct {
	Entries []Entry
	More    bool
}

// Entry is one lock of a Listing.
type Entry struct {
	Name string
	// Kind: "lock", "read", "write", "fair", "elect", "sem" or "latch".
	Kind string
	// TTL is the lease left; negative for no expiry. A semaphore's: until
	// its first permit expires.
	TTL time.Duration
	// Fence is the lock's fence counter when HasFence (not for semaphores
	// and latches).
	Fence    uint64
	HasFence bool
	Holders  Parties
	Waiters  Parties
	// Value: an election leader's value, a semaphore's permits available,
	// a latch's count; "" when dlockd said "-" (none).
	Value string
}

// Parties are an entry's holders or waiters: Total of them, and up to 8
// described.
type Parties struct {
	Total int
	List  []Party
}

// Party is one holder or waiter. Unknown fields ('-' on the wire) are ""
// or -1 (Age: negative).
type Party struct {
	Host      string // the dlockd's host
	DlockdPID int    // that dlockd's pid
	PID       int    // the client's pid (clients of the dlockd asked)
	UID       int    // the client's uid
	Count     int    // its holds, permits, or permits asked
	Age       time.Duration
}

// ListOption tunes a List.
type ListOption func(*listOptions)

type listOptions struct {
	limit int
}

// WithLimit lists at most limit names (1 to ListMax).
func WithLimit(limit int) ListOption {
	return func(o *listOptions) { o.limit = limit }
}

// List describes the locks of every kind whose names match pattern (Redis's
// glob; "" means "*"), across every dlockd sharing the Redis: at most the
// limit's entries (dlockd's default without WithLimit), only names this
// peer may read. A bad pattern or limit is ErrArgs.
func (c *Client) List(ctx context.Context, pattern string, opts ...ListOption) (Listing, error) {
	o := listOptions{limit: -1}
	for _, f := range opts {
		f(&o)
	}
	if pattern == "" {
		pattern = "*"
	}
	if !ValidName(pattern) {
		return Listing{}, &Error{Code: "ARGS", Text: "patterns are 1-255 bytes of 0x21-0x7E"}
	}
	line := "LIST " + pattern
	if o.limit != -1 {
		if o.limit < 1 || o.limit > ListMax {
			return Listing{}, &Error{Code: "ARGS", Text: "limit is 1 to 1000, not " + strconv.Itoa(o.limit)}
		}
		line += " " + strconv.Itoa(o.limit)
	}
	cl := newCall(line, false)
	if err := c.do(ctx, cl); err != nil {
		return Listing{}, err
	}
	if strings.HasPrefix(cl.reply, "ERR ") {
		return Listing{}, replyError(cl.reply)
	}
	n, more, ok := listHeader(cl.reply)
	if !ok || n != len(cl.lines) {
		return Listing{}, protoError("unexpected reply to " + line + ": " + cl.reply)
	}
	l := Listing{Entries: make([]Entry, 0, n), More: more}
	for _, el := range cl.lines {
		e, ok := parseEntry(el)
		if !ok {
			return Listing{}, protoError("bad LIST entry: " + el)
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// listHeader parses "OK LIST <n> <more>".
func listHeader(line string) (n int, more bool, ok bool) {
	w := strings.Split(line, " ")
	if len(w) != 4 || w[0] != "OK" || w[1] != "LIST" || (w[3] != "0" && w[3] != "1") {
		return 0, false, false
	}
	n, err := strconv.Atoi(w[2])
	if err != nil || n < 0 || n > ListMax || w[2] != strconv.Itoa(n) {
		return 0, false, false
	}
	return n, w[3] == "1", true
}

// parseEntry parses "= <name> <kind> <ttl_ms> <fence> <holders> <waiters> <value>".
func parseEntry(line string) (Entry, bool) {
	w := strings.Split(line, " ")
	if len(w) != 8 || w[0] != "=" {
		return Entry{}, false
	}
	e := Entry{Name: w[1], Kind: w[2]}
	ttl, err := strconv.ParseInt(w[3], 10, 64)
	if err != nil {
		return Entry{}, false
	}
	e.TTL = time.Duration(ttl) * time.Millisecond
	if w[4] != "-" {
		if e.Fence, err = strconv.ParseUint(w[4], 10, 64); err != nil {
			return Entry{}, false
		}
		e.HasFence = true
	}
	var ok bool
	if e.Holders, ok = parseParties(w[5]); !ok {
		return Entry{}, false
	}
	if e.Waiters, ok = parseParties(w[6]); !ok {
		return Entry{}, false
	}
	if w[7] != "-" {
		e.Value = w[7]
	}
	return e, true
}

// parseParties parses "<total>[,<host>/<dlockd_pid>/<pid>/<uid>/<count>/<age_ms>]...".
func parseParties(word string) (Parties, bool) {
	parts := strings.Split(word, ",")
	total, err := strconv.Atoi(parts[0])
	if err != nil || total < 0 {
		return Parties{}, false
	}
	p := Parties{Total: total}
	for _, s := range parts[1:] {
		f := strings.Split(s, "/")
		if len(f) != 6 {
			return Parties{}, false
		}
		var n [5]int64
		for i := range n {
			if f[i+1] == "-" {
				n[i] = -1
				continue
			}
			if n[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil || n[i] < 0 {
				return Parties{}, false
			}
		}
		host := f[0]
		if host == "-" {
			host = ""
		}
		age := time.Duration(-1)
		if n[4] >= 0 {
			age = time.Duration(n[4]) * time.Millisecond
		}
		p.List = append(p.List, Party{Host: host, DlockdPID: int(n[0]), PID: int(n[1]),
			UID: int(n[2]), Count: int(n[3]), Age: age})
	}
	return p, true
}
