/* Elections' shared state: candidates' values (elect.c) and observed names (observe.c).
 * SPDX-License-Identifier: MIT
 *
 * An election is a lock kind (elect.c, LOCK_MODE_ELECT) whose candidates
 * queue in Redis as a fair lock's waiters do; its leader is its one
 * holder, and the leader's value and fence are kept beside it in Redis
 * (backend/lua/elect.lua). Every change is published on the name's one
 * channel; observe.c keeps one watch of that channel per name, shared by
 * the name's observers and its local candidates (whose wake-ups it hands
 * to the lock), and reads the leader again on every message, when the
 * leader's lease ends, and after any gap. The state lives in the lock
 * manager's slot for the kind from its first use until the manager is
 * freed (its free_state) and the last observer, candidate and read are
 * gone. */
#ifndef DLOCK_LOCK_ELECT_H
#define DLOCK_LOCK_ELECT_H

#include "daemon/lock/kind.h"

/* Longest name and value (the protocol's PROTO_NAME_MAX, PROTO_VALUE_MAX). */
#define ELECT_NAME_MAX 255
#define ELECT_VALUE_MAX 255
/* A read of an observed name that failed is tried again after this long. */
#define ELECT_RETRY_MS 250
/* A name observed is read again at least this often (a lease_ms divisor),
 * so that Redis unreachable longer than a lease is noticed without any
 * event. */
#define ELECT_POLL_DIV 2
/* The leader's lease is over this long after its TTL said it ends: the
 * read then finds it gone (or its successor). */
#define ELECT_EXPIRY_SLACK_MS 2
/* A candidate's value outlives its wait while its acquire is in flight:
 * the topology may send it again until command_timeout_ms; this more. */
#define ELECT_VALUE_GRACE_MS 1000

/* The kind's own requests (lock_request_t.op of LOCK_VERB_OWN), each
 * answered at once, 1 or 0, for any name (the table's own_any). */
enum {
    ELECT_OP_RESIGN = 0, /* RESIGN: 1 if the owner led it (the next candidate
                            takes over) */
    ELECT_OP_UNOBSERVE   /* UNOBSERVE: 1 if the owner observed it (no event
                            of it comes after) */
};

typedef struct elect_s elect_t;
typedef struct oname_s oname_t;

struct elect_s {
    lockmgr_t *m;
    int closing;               /* the manager is being freed: free when empty,
                                  tell no one */
    hmap_t cands;              /* <owner id><name> -> cand_t: a candidate's value */
    size_t cands_count;
    size_t cands_lingering;    /* ... of them kept past their wait (its acquire
                                  was in flight): no ELECT waiting, for INFO */
    hmap_t names;              /* name -> oname_t: observed, or its candidates
                                  wake on its watch */
    size_t names_count;
    hmap_t owners;             /* <owner id> -> oowner_t: who observes what */
    size_t owners_count;
    lockmgr_elect_stats_t stats;
};

/* The state, in the lock manager's slot for the kind (kind_state), or NULL. */
static inline elect_t *elect_of(const lockmgr_t *m) {
    return (elect_t *)m->kind_state[LOCK_MODE_ELECT];
}
/* The state, made if needed (NULL on no memory). */
elect_t *elect_get(lockmgr_t *m);
/* Frees it once nothing uses it, once closing. */
void elect_maybe_free(lockmgr_t *m);

/* observe.c: the name's candidates here wait on its watch (wake-ups go to
 * the lock's waiters, lock_on_watch) from elect_watch until elect_unwatch. */
void elect_watch(lockmgr_t *m, const char *name, size_t len);
void elect_unwatch(lockmgr_t *m, const char *name, size_t len);
/* LEADER and OBSERVE. */
void observe_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req);
/* UNOBSERVE: 1 if o observed name, 0 otherwise; and every observation
 * of o's (its owner_drop). */
int observe_unobserve(lockmgr_t *m, lock_owner_t *o, const char *name, size_t len);
void observe_unobserve_all(lockmgr_t *m, lock_owner_t *o);
/* A live restore (handover.c): o's observations as observe records, and
 * one such record read back (its word read already): 1 if the word was
 * "observe". The observation keeps what its observer was told, so that
 * only a later leader is an event. */
struct statew_s;
struct stater_s;
void observe_save_owner(const lockmgr_t *m, const lock_owner_t *o, struct statew_s *w);
int observe_load(lockmgr_t *m, lock_owner_t *o, const char *word, struct stater_s *r);
/* The observe state's parts freed with elect_t (names, owners). */
int observe_empty(const elect_t *e);

#endif
