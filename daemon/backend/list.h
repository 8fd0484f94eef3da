/* LIST's reading of Redis: SCAN every node the topology keeps locks on, describe each lock key found.
 * SPDX-License-Identifier: MIT
 *
 * backend_list() walks the keyspace with SCAN (LIST_SCAN_COUNT keys a
 * call, so Redis is never blocked for long), describes every page's lock
 * keys in read-only script calls (lua/list.lua) of LIST_DESCRIBE_MAX keys
 * each, one after the other, and reads the daemons' registry once per
 * node, until it has the limit or the nodes are done.
 * Cluster: every primary; Sentinel: the primary; quorum: every node, a
 * name kept where a majority of the nodes agree on its holder. Entries
 * come sorted by name. The pure parts (which keys are locks, the MATCH
 * pattern, merging nodes' answers, registry entries, owner fields) are
 * the list_* functions below, in list_pure.c, tested by
 * tests/unit/test_list.c. */
#ifndef DLOCK_BACKEND_LIST_H
#define DLOCK_BACKEND_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"

/* Keys SCAN visits per call (its COUNT): a call costs Redis about this many
 * dictionary steps, well under a millisecond. */
#define LIST_SCAN_COUNT   1000
/* Lock keys described per script call: a SCAN page's keys go in calls of
 * at most this many, one after the other, so that no call holds Redis for
 * long (about 20 us a key on a busy 2-core machine: some 1 ms a call; a
 * page of 1000 in one call held it 30 ms) and other clients' commands run
 * between them. */
#define LIST_DESCRIBE_MAX 50
/* Holders and waiters told per lock; the totals are told too. */
#define LIST_HOLDERS_MAX  8
#define LIST_WAITERS_MAX  8
/* Longest owner field kept ("<uuid>:<id>", a Redisson permit id). */
#define LIST_FIELD_MAX    80
#define LIST_HOST_MAX     64
/* Nodes of a topology scanned at most. */
#define LIST_NODES_MAX    64
/* A listing answers within this many command_timeout_ms (30 s with the
 * default 2000), ERR BACKEND once it is over: every call has its own
 * command_timeout_ms, but a Redis whose SCAN never comes back to cursor 0
 * would keep LIST going call after call. A keyspace of some 10 million keys
 * takes about 10 s to walk. */
#define LIST_DEADLINE_TIMEOUTS 15
/* SCAN calls per node at most (LIST_SCAN_COUNT keys each: 100 million
 * keys), whatever the deadline: past them the node fails the listing. */
#define LIST_SCAN_ROUNDS_MAX 100000

/* One holder or waiter: its field in Redis, its dlockd (host "" and dpid
 * -1 when no dlockd registered it), its pid and uid (-1 unless it is a
 * client of this dlockd). */
typedef struct list_who_s {
    char field[LIST_FIELD_MAX];
    long long count;            /* holds (a semaphore: permits); waiters: 0 */
    char host[LIST_HOST_MAX];
    long long dpid, pid, uid;
    int ours;                   /* a client of this dlockd: owner is its id */
    uint64_t owner;
    long long age_ms;           /* this dlockd's: held or waited for so long, else -1 */
} list_who_t;

typedef struct list_entry_s {
    char name[255 + 1];
    size_t len;
    backend_mode_t kind;        /* what it is held as (lua/part/kind.lua) */
    long long ttl_ms;           /* -1 no expiry */
    uint64_t fence;             /* 0: none (a semaphore) */
    size_t holders_total, nholders;
    list_who_t holders[LIST_HOLDERS_MAX];
    size_t waiters_total, nwaiters;
    list_who_t waiters[LIST_WAITERS_MAX];
    char value[BACKEND_ANSWER_MAX + 1]; /* an election's leader's; a semaphore's
                                          permits available */
    int agree;                  /* quorum: nodes that agree on it */
} list_entry_t;

typedef struct list_result_s {
    backend_status_t status;
    char error[BACKEND_ERR_LEN];
    list_entry_t *entries;      /* sorted by name; the callee's, valid in cb */
    size_t n;
    int more;                   /* more names match than limit */
} list_result_t;

typedef void (*list_cb)(void *data, const list_result_t *res);
/* Whether a name may be listed (the asking peer's read right). */
typedef int (*list_keep_cb)(void *data, const char *name, size_t len);

typedef struct list_run_s list_run_t;

/* LIST's word for what a name is held as: its mode's row's list_word
 * (scripts.c), "lock" for a mode no name is held as. */
const char *list_word(backend_mode_t kind);

/* Starts a listing; cb fires exactly once, never before this returns,
 * unless list_cancel() is called first. keep is called only before cb (or
 * list_cancel), with data. NULL on no memory. */
list_run_t *backend_list(backend_t *b, const char *pattern, size_t plen, size_t limit,
                         list_keep_cb keep, list_cb cb, void *data);
/* cb will not fire; the run ends by itself. */
void list_cancel(list_run_t *r);

/* ---- pure parts ---- */

/* The MATCH pattern: prefix with glob characters escaped, then pattern.
 * Returns its length, or 0 when it does not fit cap. */
size_t list_match(char *out, size_t cap, const char *prefix, const char *pattern, size_t plen);
/* The lock name of a key SCAN found: 1 and *name, *len when key is
 * prefix + a valid name that is no companion key; 0 otherwise. */
int list_key_name(const char *key, size_t klen, const char *prefix, const char **name,
                  size_t *len);
/* A registry entry "<seen ms> dlockd:<host>:<pid>" into host and pid (""
 * and -1 when it cannot be read). */
void list_registry_entry(const char *entry, size_t len, char *host, size_t cap,
                         long long *pid);
/* Quorum: keeps in a[0..*n) only entries that at least need of the nodes
 * agree on (same name, kind and first holder); a holds the entries of
 * every node, sorted by name. Returns the count kept. */
size_t list_majority(list_entry_t *a, size_t n, unsigned need);
int list_entry_cmp(const void *a, const void *b);
/* An owner field "<uuid>:<id>", or a write hold's "<uuid>:<id>:write"
 * (Redisson's): the length of its uuid, and its id in *id; 0 when it has
 * no ':' after a uuid. */
#define LIST_WRITE_SUFFIX ":write"
size_t list_field_uuid(const char *field, uint64_t *id);

#endif
