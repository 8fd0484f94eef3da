/* The lock manager's own structures, shared by its files and no one else.
 * SPDX-License-Identifier: MIT
 *
 *   lockmgr.c   owners, holds, the lock table, answers, the public calls
 *   wait.c      waiting and granting: queues, attempts, wake-ups
 *   request.c   requests on a name: reentry, UNLOCK, RENEW, STATUS, WHO,
 *               FORCEUNLOCK
 *   watchdog.c  renewals of watchdog-kept holds, loss deadlines
 *   release.c   releases (and leaves of places in Redis's queues) that
 *               must reach Redis even while it is away
 *   kind.h      the lock-kind interface; kind.c the modes' table, and one
 *               file per kind: mutex.c, rwlock.c, semaphore.c, fair.c,
 *               elect.c (with observe.c), multi.c; elect_read.c and
 *               redisq.c, helpers some kinds share
 *
 * No kind's state is a field here: a kind keeps its own in the kind
 * areas of lock_t, queue_t and wait_t (LOCK_KIND_*_AREA, kind.h).
 *
 * A lock_t is one name this daemon cares about: its local holds (hold_t,
 * one per holder; a mutex has at most one), its FIFO of waiters, and the
 * one acquire attempt in flight. It lives while anything refers to it.
 * A name is one kind of lock at a time here (lock_t.kind), as in Redis. */
#ifndef DLOCK_LOCK_INTERNAL_H
#define DLOCK_LOCK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/backend/backend.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/util/hmap.h"
#include "daemon/util/pool.h"
#include "daemon/util/timers.h"
#include "daemon/util/util.h"

typedef struct lock_s lock_t;
typedef struct hold_s hold_t;
typedef struct lock_kind_s lock_kind_t;
typedef struct wait_s wait_t;

/* Room for what a kind keeps of its own in a lock_t, a queue_t and a
 * wait_t (the core's structs, one each per name, per name waited for and
 * per waiter): the kind views it as a struct of its own, checked to fit
 * (kind.h's LOCK_KIND_AREA_FITS), so that no kind's state is a core
 * field and the hot path makes no allocation more. An area is zero when
 * its struct is made, and a lock_t's again when its name becomes another
 * kind's (lock_take_kind). The sizes are today's largest users'. */
#define LOCK_KIND_LOCK_AREA 16  /* a semaphore's count of permits free */
#define LOCK_KIND_QUEUE_AREA 56 /* the keep timer of a queue in Redis */
#define LOCK_KIND_WAIT_AREA 16  /* a semaphore's base and lease; a read in flight */
#define LOCK_KIND_AREA_ALIGN 8  /* the alignment each area has */

/* The text kept of why a waiter's last grant was undone. */
#define WAIT_WHY_LEN 64
/* ERR BACKEND's text for an acquire answered HOLD_GONE where its script
 * never says it (a reply rewritten on its way). */
#define LOCK_UNEXPECTED_HOLD_GONE "unexpected answer from Redis: hold gone"
typedef struct release_s release_t;

/* What an owner's request in flight is. */
typedef enum {
    PENDING_WAIT = 0,   /* queued on a lock (LOCK, TRYLOCK) */
    PENDING_OP,         /* one backend call (reentry, RENEW, STATUS, FORCE) */
    PENDING_KIND        /* a request its kind tracks itself (a multi-name
                           wait): the kind's cancel and orphan hooks end it */
} pending_type_t;

/* One request of an owner's in flight. An owner has any number at once
 * (tagged requests); its session keeps two that change one name from
 * being here together. */
typedef struct pending_s {
    pending_type_t type;
    const lock_kind_t *kind;   /* PENDING_KIND: whose request it is */
    void *call;                /* lockmgr_request's call: its answer names it */
    LIST_ENTRY(pending_s) by_owner; /* on the owner's pendings until it ends */
    int linked;
} pending_t;

LIST_HEAD(hold_list_s, hold_s);
TAILQ_HEAD(wait_list_s, wait_s);
TAILQ_HEAD(dog_list_s, hold_s);
STAILQ_HEAD(release_list_s, release_s);

typedef struct lock_acct_s lock_acct_t;

struct lock_owner_s {
    lockmgr_t *mgr;            /* for a drop that finishes from a timer */
    uint64_t id;               /* unique in this daemon's life */
    uid_t uid;                 /* peer credentials */
    lock_acct_t *acct;         /* its uid's account (peruid.c) */
    pid_t pid;
    lock_reply_cb on_reply;
    lock_event_cb on_event;
    void *data;
    struct hold_list_s holds;  /* what it holds */
    size_t held_count;
    LIST_HEAD(, pending_s) pendings; /* its requests in flight */
    size_t npending;
    void *call_now;            /* inside lockmgr_request: the call being taken */
    lock_reply_t *now;         /* ... and where its reply at once goes */
    int answered;              /* ... and whether it came */
    int in_callback;           /* inside its on_reply or on_event now */
    int dropped;               /* dropped from inside one: told nothing more,
                                  gains no observation */
    timers_entry_t reap;       /* ... and the drop finishes from here */
};

/* One holder's hold on a lock. */
struct hold_s {
    lock_t *lock;
    lock_owner_t *owner;
    uint32_t count;            /* reentrant holds; a semaphore's: permits, its ids
                                  in Redis <owner>:1 .. <owner>:count */
    lock_mode_t mode;          /* an owner may hold a name twice: READ and WRITE */
    uint64_t fence;
    uint32_t lease_ms;         /* the lease asked for; 0: watchdog-kept */
    uint64_t grant_id;         /* unique per grant: ops in flight compare it */
    uint64_t confirmed_at;     /* when the last confirmed grant/renewal was sent */
    uint32_t redis_lease_ms;   /* the TTL that grant/renewal set: Redis keeps the
                                  hold until confirmed_at + this at least */
    uint64_t granted_ns;       /* uv_hrtime() at the grant, for the metrics */
    timers_entry_t expiry;     /* lease mode: the lease runs out */
    LIST_ENTRY(hold_s) by_owner;
    LIST_ENTRY(hold_s) by_lock;
    TAILQ_ENTRY(hold_s) dog;   /* watchdog holds, oldest confirmation first */
    unsigned on_dog : 1;       /* on m->dog or, with on_stale, on m->stale */
    unsigned on_stale : 1;     /* its lease in Redis is not the configured one */
    unsigned renewing : 1;     /* in a watchdog batch now */
    unsigned renew_failed : 1; /* the last renewal got no confirmed answer */
};

/* A lock's waiters, and what waiting needs; it exists only while someone
 * waits, so that a held lock nobody waits for stays small. */
typedef struct queue_s {
    struct wait_list_s waiters; /* first come first served; only the head tries */
    lock_t *lock;
    timers_entry_t retry;      /* the holder's lease ends: try again */
    timers_entry_t yield;      /* a yield to other daemons' waiters ends */
    int subscribed;            /* watching the name for releases */
    int yielding;              /* local hand-off held back for other daemons */
    int turn_passed;           /* a try refused for another daemon's turn
                                  (TAKEN -2) before the watch was in force:
                                  its confirmation is that turn's, not a
                                  release to try on */
    int wake_queued;           /* Redis refused a waiter of a wake_one kind:
                                  this daemon is in the name's wake queue,
                                  and the next attempt's grant takes it out
                                  (or the queue's end: BACKEND_LEAVE) */
    backend_mode_t watch_mode; /* the channel watched ... */
    uint64_t watch_owner;      /* ... and whose (a fair lock's waiter's), or 0 */
    _Alignas(LOCK_KIND_AREA_ALIGN) unsigned char kind_area[LOCK_KIND_QUEUE_AREA];
                               /* its lock's kind's own (lock_queue_area) */
} queue_t;

struct lock_s {
    hmap_node_t node;          /* by name */
    lockmgr_t *mgr;
    struct hold_list_s holds;  /* local holders */
    queue_t *q;                /* while anyone waits */
    LIST_HEAD(, wait_s) flying; /* waits whose acquire is in flight: one, or
                                  readers at the head, together */
    unsigned attempts;         /* ... how many */
    int remote_interest;       /* our last release woke other daemons' waiters */
    int busy;                  /* backend calls in flight that name this lock */
    int first_used;            /* first holds a hold */
    const lock_kind_t *kind;   /* while held or waited for */
    _Alignas(LOCK_KIND_AREA_ALIGN) unsigned char kind_area[LOCK_KIND_LOCK_AREA];
                               /* the kind's own (lock_area) */
    hold_t first;              /* the first holder's hold lives here: a mutex
                                  needs no other allocation, and the watchdog
                                  finds the hold next to its name */
    size_t len;
    char name[];
};

struct wait_s {
    pending_t hdr;
    lock_owner_t *owner;       /* NULL once cancelled */
    uint64_t owner_id;         /* kept to undo a grant that came too late */
    lock_t *lock;
    TAILQ_ENTRY(wait_s) link;
    int queued;                /* in lock's queue */
    int in_flight;             /* its acquire is in flight (on lock->flying) */
    int parked;                /* a reader Redis refused: it tries again on a
                                  wake-up, a retry turn or Redis coming back,
                                  not whenever the queue moves */
    int granted;               /* answered with a grant: it leaves no place */
    int undone;                /* withdrawn with its acquire in flight: the undo
                                  went right behind it (lock_wait_withdraw) */
    LIST_ENTRY(wait_s) flight;
    lock_mode_t mode;
    uint32_t count;            /* what the request counts (lock_request_t.count,
                                  a semaphore's permits); 0 where its kind
                                  counts nothing */
    int woken;                 /* a wake-up came while its acquire was in flight */
    int once;                  /* TRYLOCK with wait 0: one try */
    int tried;                 /* Redis said TAKEN at least once */
    int unanswered;            /* an attempt before its last got no answer
                                  (or was undone unreplicated): it may have
                                  run, and queued it in Redis all the same */
    uint32_t lease_ms;
    long long ttl_ms;          /* the holder's TTL as last seen, -1 unknown */
    char unacked[WAIT_WHY_LEN]; /* the last try's grant was not replicated in
                                   time: why, for a TRYLOCK whose wait ends */
    uint64_t sent_at;
    uint64_t started_ns;       /* uv_hrtime() at the request, for the metrics */
    timers_entry_t deadline;   /* TRYLOCK's wait_ms */
    backend_op_t acquire;      /* its acquire, while in flight */
    _Alignas(LOCK_KIND_AREA_ALIGN) unsigned char kind_area[LOCK_KIND_WAIT_AREA];
                               /* its kind's own (lock_wait_area) */
    pending_t *whole;          /* a place of a larger request (its pending,
                                  PENDING_KIND), which counts itself as one
                                  waiter: this place is not in waiting; NULL
                                  for a wait of its own */
};

/* A release that must reach Redis even if it is down now, or a leave of
 * a place in its queue (BACKEND_LEAVE), which must as well. */
struct release_s {
    backend_op_t op;
    lockmgr_t *mgr;
    STAILQ_ENTRY(release_s) link;
    uint64_t give_up_at;       /* the lease (the place) has run out by then anyway */
    backend_op_type_t type;    /* BACKEND_RELEASE or BACKEND_LEAVE */
    lock_mode_t mode;
    int counted;               /* shutdown waits for this one */
    size_t len;
    char name[];
};

struct lockmgr_s {
    const conf_t *conf;
    timers_t *timers;
    backend_t *backend;
    hmap_t locks;
    hmap_t accts;              /* uid -> lock_acct_t (peruid.c) */
    pool_t lock_pool, queue_pool, wait_pool, release_pool; /* freed ones, for reuse */
    uint64_t grant_seq;
    histo_t wait_time;         /* for the metrics */
    histo_t hold_time;
    /* watchdog */
    uint32_t dog_lease;        /* the lease_ms the watchdog renews with */
    struct dog_list_s dog;     /* holds whose lease in Redis is dog_lease, by
                                  confirmed_at: due and loss in that order */
    struct dog_list_s stale;   /* holds confirmed with another lease (before a
                                  reload changed lease_ms), by loss deadline:
                                  due at once */
    hold_t *dog_cursor;        /* where the next sweep starts (NULL: the head) */
    timers_entry_t sweep;      /* the next watchdog hold is due */
    int renew_inflight;        /* watchdog batches awaiting Redis */
    timers_entry_t loss;       /* the oldest watchdog hold could expire */
    /* releases waiting for Redis to come back */
    struct release_list_s retries;
    uint64_t waiting;
    uint64_t held;
    lockmgr_stats_t stats;
    char why[BACKEND_ERR_LEN]; /* detail of an ERR BACKEND given at once */
    char host[BACKEND_WHO_DAEMON_MAX]; /* ours, for WHO */
    void *kind_state[LOCK_MODE_COUNT]; /* a kind's own state, at its first
                                  mode (lock_kind_mode), the kind's to make;
                                  its table's free_state frees what is left
                                  at lockmgr_free */
    int frozen;                /* a hand-over: no waiter tries (lock_kick) */
    /* shutdown */
    int stopping;
    int shutdown_left;
    timers_entry_t done_timer;  /* calls done outside any Redis callback */
    lockmgr_done_cb done;
    void *done_data;
};

/* One backend call for a request on a held lock, or STATUS, WHO, FORCE. */
typedef struct lock_op_s lock_op_t;
typedef void (*lock_op_done_cb)(lock_op_t *op, lock_owner_t *o, hold_t *h);
struct lock_op_s {
    pending_t hdr;
    backend_op_t bop;
    lockmgr_t *mgr;
    lock_owner_t *owner;       /* NULL once the owner left */
    lock_t *lock;              /* holds a busy reference, or NULL */
    lock_verb_t verb;
    lock_mode_t mode;          /* the hold it is about */
    uint64_t grant_id;         /* of the owner's hold when sent */
    uint32_t lease_ms;         /* as asked for */
    uint32_t keep_lease;       /* reentry, RENEW: the hold's lease_ms once done */
    uint64_t sent_at;
    uint32_t wait_ms;          /* to retry a reentry as a fresh wait */
    lock_op_done_cb done;      /* on success, and on any answer once the owner left */
    union {
        backend_who_t who;     /* WHO's answer */
        char answer[BACKEND_ANSWER_MAX + 1]; /* a kind's op's value (bop.answer) */
    };
    size_t len;
    char name[];
};

/* lockmgr.c; the few on every request's path are inline here. */
lock_t *lock_get(lockmgr_t *m, const char *name, size_t len);

static inline lock_t *lock_find(lockmgr_t *m, const char *name, size_t len) {
    hmap_node_t *n = hmap_get(&m->locks, name, len);
    return n ? container_of(n, lock_t, node) : NULL;
}

/* Someone here holds or waits for l: its kind is set until then. */
static inline int lock_in_use(const lock_t *l) {
    return l != NULL && (!LIST_EMPTY(&l->holds) || l->q != NULL || l->attempts > 0);
}

static inline hold_t *lock_hold_first(const lock_t *l) {
    return LIST_FIRST(&l->holds);
}

/* The owner's hold of mode, or NULL (l may be NULL). */
static inline hold_t *lock_hold_of(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    hold_t *h;
    if (l == NULL) return NULL;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (h->owner == o && h->mode == mode) return h;
    return NULL;
}
/* The owner's hold of any mode, a shared mode's last. */
hold_t *lock_hold_mine(const lock_t *l, const lock_owner_t *o);
/* The hold has ended without Redis being told: forget it and free it. */
void lock_hold_drop(hold_t *h);
/* How long a lease of lease_ms vouches for a hold after Redis confirmed
 * it: the lease less the backend's clock drift allowance (a quorum's). */
uint32_t lock_hold_valid(const lockmgr_t *m, uint32_t lease_ms);
/* Remaining lease of the local holder, or -1. */
long long lock_local_ttl(const lock_t *l);
void lock_answer_timeout(lockmgr_t *m, lock_owner_t *o, void *call, long long ttl_ms);
/* ERR BACKEND with why the backend cannot serve name now. */
void lock_answer_unavailable(lockmgr_t *m, lock_owner_t *o, void *call, const char *name,
                             size_t len);
/* p is in flight for o, for its call; it ends (linked no more) at
 * lock_pending_end, which every kind of pending reaches once. */
void lock_pending_start(lock_owner_t *o, pending_t *p, pending_type_t kind, void *call);
/* The same for a request kind k tracks itself (PENDING_KIND): its cancel
 * and orphan hooks end it. */
void lock_pending_start_kind(lock_owner_t *o, pending_t *p, const lock_kind_t *k, void *call);
void lock_pending_end(lock_owner_t *o, pending_t *p);
void lockmgr_shutdown_step(lockmgr_t *m);

/* wait.c */
/* A watch's wake-up (backend_watch_cb), data the lock_t. */
void lock_on_watch(void *data, backend_event_t ev);
/* A wake-up or a retry turn: waiters Redis refused may try again (the
 * kind says which). */
void lock_unpark(lock_t *l);
/* Stops l's queue's and waiters' timers and frees them (lockmgr_free). */
void lock_queue_free(lock_t *l);

/* request.c */
void lock_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req);
/* The owner left while op was in flight. */
void lock_op_orphan(lock_op_t *op);

/* watchdog.c */
/* Redis confirmed the hold as of sent_at, with an op that set its TTL to
 * lease_ms: move its deadlines (by the hold's mode, h->lease_ms). */
void watchdog_confirm(hold_t *h, uint64_t sent_at, uint32_t lease_ms);
/* The same, and plan the next sweep and loss check. */
void watchdog_set_confirmed(hold_t *h, uint64_t sent_at, uint32_t lease_ms);
/* An op that sets the lease got no answer but may have run: never vouch
 * for the hold past what sent_at + lease_ms allows. The mode stays. */
void watchdog_limit(hold_t *h, uint32_t lease_ms, uint64_t sent_at);
/* The configured lease_ms or renew_every_ms changed. */
void watchdog_reconfigure(lockmgr_t *m);
/* A live restore: h, confirmed as of sent_at with lease_ms, is kept as
 * its mode says (its lease timer, or the watchdog's lists, unsorted) ...
 * and watchdog_resort() puts the lists in order once all are in (0, or
 * -1 on no memory). */
void watchdog_adopt(hold_t *h, uint64_t sent_at, uint32_t lease_ms);
int watchdog_resort(lockmgr_t *m);
void watchdog_remove(hold_t *h);
void watchdog_sweep(lockmgr_t *m);
void watchdog_arm_loss(lockmgr_t *m);
void watchdog_stop(lockmgr_t *m);

/* release.c */
/* Deletes owner's holds on name in Redis, retrying while Redis is away,
 * for at most lease_ms (0: the configured lease). */
void release_all(lockmgr_t *m, const char *name, size_t len, uint64_t owner, uint32_t lease_ms,
                 lock_mode_t mode);
/* Gives back part of owner's hold, its units base + 1 .. base + count, for
 * a kind whose hold is many units in Redis (a semaphore's permit ids). */
void release_part(lockmgr_t *m, const char *name, size_t len, uint64_t owner, uint32_t lease_ms,
                  lock_mode_t mode, uint32_t base, uint32_t count);
/* Deletes everything h holds in Redis (before h is dropped), as its kind
 * says. */
void release_hold(const hold_t *h);
/* ... all of the owner's holds of h's mode: most kinds' way. */
void release_hold_all(const hold_t *h);

/* Takes owner's place out of name's queue in Redis (a fair lock's, an
 * election's: mode's), retrying while Redis is away, after any acquire of
 * the owner's still in flight there, for at most the configured lease_ms
 * (the place has ended by then). Dropped unheard if the owner waits for
 * the name in mode again meanwhile: that wait's place is its own. Of
 * LOCK_WAKE_MODE (owner 0), this daemon's place in the name's wake queue:
 * dropped if any waiter of a wake_one kind waits for it again, whose
 * queue then takes the place as its own (wake_queued). */
void release_leave(lockmgr_t *m, const char *name, size_t len, uint64_t owner, lock_mode_t mode);
/* The mode a leave of the wake queue goes as: the plain lock's, whose
 * batch script runs it. */
#define LOCK_WAKE_MODE LOCK_MODE_MUTEX
/* A plain lock's TAKEN ttl_ms when the lock was free but another daemon's
 * turn (the batch script's yield: part/ops.lua); never a reply's. */
#define LOCK_TTL_TURN (-2)
/* A new grant to owner makes older queued releases of it (of that mode) stale. */
void release_forget(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                    lock_mode_t mode);
/* A grant to owner of a hold of units 1..count (release_part's): queued
 * releases of those units are stale, of the units above they still stand. */
void release_forget_below(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                          lock_mode_t mode, uint32_t count);
/* Redis is back: send the queued releases. */
void release_resend(lockmgr_t *m);
/* Shutdown: send every queued release once more, counted. */
void release_flush_for_shutdown(lockmgr_t *m);
void release_free_all(lockmgr_t *m);

/* peruid.c: each uid's holds and waiters, for max_locks_per_uid and
 * max_waiters_per_uid. join at an owner's start (0, or -1 on no memory),
 * leave at its end; held and waiting follow o->held_count and the queue. */
int lock_acct_join(lockmgr_t *m, lock_owner_t *o);
void lock_acct_leave(lock_owner_t *o);
void lock_acct_free_all(lockmgr_t *m);
void lock_acct_held(lock_owner_t *o, int delta);
void lock_acct_waiting(lock_owner_t *o, int delta);
/* LOCK_WHY_NONE, or the per-uid limit n new holds, or a new wait, would
 * pass. Checked when a request comes, they cannot bound holds alone: the
 * requests of a uid's connections wait and fly at once, so a grant that
 * makes new holds passes lock_acct_room() too, or is given back. */
lock_why_t lock_acct_new_holds(const lockmgr_t *m, const lock_owner_t *o, size_t n);
lock_why_t lock_acct_new_wait(const lockmgr_t *m, const lock_owner_t *o);
/* LOCK_WHY_NONE, or the limit that n holds more of o would pass now: its
 * connection's max_locks_per_client, its uid's max_locks_per_uid. */
lock_why_t lock_acct_room(const lockmgr_t *m, const lock_owner_t *o, size_t n);

#endif
