/* The election read: whether an election leads a name, for the kinds whose holds an election's leader refuses.
 * SPDX-License-Identifier: MIT
 *
 * An election's leader holds a plain lock's hash (elect.lua), so Redis
 * refuses a plain, fair or multi-name lock of a name another daemon's
 * election leads as TAKEN. Those kinds (mutex.c, fair.c, multi.c) read
 * what the name is on a wait's first refusal (a plain lock's: on a
 * refusal its script says an election's leader made; one LEADER read, where the
 * topology has elections) and end the wait with ERR KIND if an election
 * leads it, as on the leader's own daemon. elect_read.c. */
#ifndef DLOCK_LOCK_ELECT_READ_H
#define DLOCK_LOCK_ELECT_READ_H

#include "daemon/lock/kind.h"

typedef struct election_read_s election_read_t;

/* Reads whether an election leads the name and calls cb(data, leads)
 * once, never from inside this call, unless lock_read_forget() came
 * first; NULL when no read went (the topology has no elections, or no
 * memory). */
typedef void (*lock_election_cb)(void *data, int leads);
election_read_t *lock_read_election(lockmgr_t *m, const char *name, size_t len,
                                    lock_election_cb cb, void *data);
void lock_read_forget(election_read_t *r);

/* For a kind's refused and leave hooks, read the read in flight about w,
 * NULL when none, kept in the kind's waiter area: the first refusal of a
 * wait that waits on reads the name, and ends the wait with ERR KIND if
 * an election leads it (read is NULL again once the answer came); leaving
 * forgets the read. */
void lock_refused_read_kind(lock_t *l, wait_t *w, election_read_t **read);
/* The same for a plain lock, whose acquire's refusal says whether an
 * election's leader made it (res.leader): only such a refusal reads, and
 * any of them may (not a TRYLOCK of 0), while no read is in flight. */
void lock_refused_read_leader(lock_t *l, wait_t *w, election_read_t **read);
void lock_leave_read_kind(election_read_t **read);

#endif
