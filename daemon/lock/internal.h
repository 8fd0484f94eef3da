/* The lock manager's own structures, shared by its files and no one else.
 * SPDX-License-Identifier: MIT
 *
 *   lockmgr.c   requests, owners, the lock table, waiting and granting
 *   watchdog.c  renewals of watchdog-kept holds, loss deadlines
 *   release.c   releases that must reach Redis even while it is away
 *   semaphore.c a semaphore's own steps: permits in, permits out
 *   fair.c      a fair lock's own steps: places in Redis's queue
 *
 * A lock_t is one name this daemon cares about: its local holds (hold_t,
 * one per holder; a mutex has at most one), its FIFO of waiters, and the
 * one acquire attempt in flight. It lives while anything refers to it.
 * A name is one kind of lock at a time here (lock_kind_t), as in Redis. */
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

typedef struct lock_s lock_t;
typedef struct hold_s hold_t;

typedef enum {
    LOCK_KIND_MUTEX = 0,       /* LOCK, UNLOCK */
    LOCK_KIND_RW,              /* RLOCK, WLOCK: holds of modes READ and WRITE */
    LOCK_KIND_SEM,             /* ACQUIRE, RELEASE: holds of permits */
    LOCK_KIND_FAIR             /* FAIRLOCK, UNLOCK: waiters queue in Redis */
} lock_kind_t;
typedef struct wait_s wait_t;

/* The text kept of why a waiter's last grant was undone. */
#define WAIT_WHY_LEN 64
typedef struct release_s release_t;

/* What an owner's request in flight is. */
typedef enum {
    PENDING_WAIT = 0,   /* queued on a lock (LOCK, TRYLOCK) */
    PENDING_OP          /* one backend call (reentry, RENEW, STATUS, FORCE) */
} pending_kind_t;

typedef struct pending_s {
    pending_kind_t kind;
} pending_t;

LIST_HEAD(hold_list_s, hold_s);
TAILQ_HEAD(wait_list_s, wait_s);
TAILQ_HEAD(dog_list_s, hold_s);
STAILQ_HEAD(release_list_s, release_s);

struct lock_owner_s {
    uint64_t id;               /* unique in this daemon's life */
    uid_t uid;                 /* peer credentials */
    pid_t pid;
    lock_reply_cb on_reply;
    lock_event_cb on_event;
    void *data;
    struct hold_list_s holds;  /* what it holds */
    size_t held_count;
    pending_t *pending;        /* the request in flight, or NULL */
    lock_reply_t *now;         /* inside lockmgr_request: where a reply at once goes */
    int answered;              /* ... and whether it came */
    int in_callback;           /* inside its on_reply or on_event now */
    int dropped;               /* dropped from inside one: told nothing more */
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
    uint64_t watch_owner;      /* a fair lock's: whose channel is watched */
    timers_entry_t keep;       /* a fair lock's waiters ask again, in order,
                                  keeping their places in Redis's queue */
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
    lock_kind_t kind;          /* while held or waited for */
    long long sem_free;        /* a semaphore's permits free in Redis after
                                  our last grant, plus those we gave back
                                  since; 0 after a refusal (sem_kick) */
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
    LIST_ENTRY(wait_s) flight;
    lock_mode_t mode;
    uint32_t permits;          /* SEM: asked for */
    uint32_t base;             /* SEM: the owner's permits when the attempt went */
    uint32_t hold_lease;       /* SEM: the hold's lease once granted (0 watchdog) */
    int woken;                 /* a wake-up came while its acquire was in flight */
    int once;                  /* TRYLOCK with wait 0: one try */
    int tried;                 /* Redis said TAKEN at least once */
    uint32_t lease_ms;
    long long ttl_ms;          /* the holder's TTL as last seen, -1 unknown */
    char unacked[WAIT_WHY_LEN]; /* the last try's grant was not replicated in
                                   time: why, for a TRYLOCK whose wait ends */
    uint64_t sent_at;
    uint64_t started_ns;       /* uv_hrtime() at the request, for the metrics */
    timers_entry_t deadline;   /* TRYLOCK's wait_ms */
    backend_op_t acquire;      /* its acquire, while in flight */
};

/* A release that must reach Redis even if it is down now. */
struct release_s {
    backend_op_t op;
    lockmgr_t *mgr;
    STAILQ_ENTRY(release_s) link;
    uint64_t give_up_at;       /* the lease has run out by then anyway */
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
    /* shutdown */
    int stopping;
    int shutdown_left;
    timers_entry_t done_timer;  /* calls done outside any Redis callback */
    lockmgr_done_cb done;
    void *done_data;
};

/* lockmgr.c */
void lock_kick(lock_t *l);
lock_t *lock_get(lockmgr_t *m, const char *name, size_t len);
int lock_in_use(const lock_t *l);
lock_kind_t lock_kind_of(lock_mode_t mode);
hold_t *hold_of(const lock_t *l, const lock_owner_t *o, lock_mode_t mode);
hold_t *hold_new(lock_t *l, lock_owner_t *o, uint64_t fence, uint32_t lease_ms,
                 lock_mode_t mode);
/* The hold's last permit or hold is given back: Redis is told, the next
 * waiter may go. */
void release_local(hold_t *h);
void answer(lock_owner_t *o, const lock_reply_t *r);
void answer_value(lock_owner_t *o, long long v);
void answer_error(lockmgr_t *m, lock_owner_t *o, lock_err_t err, const char *detail);
/* ERR NOTHELD, or ERR KIND when o holds l as another kind. */
void answer_notheld(lockmgr_t *m, lock_owner_t *o, const lock_t *l, lock_mode_t mode);
/* ERR KIND's text for l held as held; lives in m until the next one. */
const char *kind_text(lock_t *l, backend_mode_t held);
/* Sends w's acquire. */
void attempt(lock_t *l, wait_t *w);
/* A watch's wake-up (backend_watch_cb), data the lock_t. */
void lock_on_watch(void *data, backend_event_t ev);
/* Takes w out of its queue; frees it unless its acquire is in flight. */
void wait_end(wait_t *w);
/* Undoes what w's acquire may have granted. */
void wait_undo(lock_t *l, const wait_t *w, uint64_t owner);
void lock_maybe_free(lock_t *l);
lock_t *lock_find(lockmgr_t *m, const char *name, size_t len);
hold_t *hold_first(const lock_t *l);
/* The hold has ended without Redis being told: forget it and free it. */
void hold_drop(hold_t *h);
/* The holder can no longer count on the hold: tell it, drop it. */
void hold_lost(hold_t *h, lock_loss_t why);
/* How long Redis may keep the hold after its last confirmation. */
uint32_t hold_redis_lease(const hold_t *h);
/* How long a lease of lease_ms vouches for a hold after Redis confirmed
 * it: the lease less the backend's clock drift allowance (a quorum's). */
uint32_t hold_valid(const lockmgr_t *m, uint32_t lease_ms);
void lockmgr_shutdown_step(lockmgr_t *m);

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
void watchdog_remove(hold_t *h);
void watchdog_sweep(lockmgr_t *m);
void watchdog_arm_loss(lockmgr_t *m);
void watchdog_stop(lockmgr_t *m);

/* release.c */
/* Deletes owner's holds on name in Redis, retrying while Redis is away,
 * for at most lease_ms (0: the configured lease). */
void release_all(lockmgr_t *m, const char *name, size_t len, uint64_t owner, uint32_t lease_ms,
                 lock_mode_t mode);
/* Gives back a semaphore's permits base + 1 .. base + permits of owner. */
void release_permits(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                     uint32_t lease_ms, uint32_t base, uint32_t permits);
/* Deletes everything h holds in Redis (before h is dropped). */
void release_hold(const hold_t *h);

/* semaphore.c */
/* A semaphore's attempt: its permits, its base, the hold's lease. */
void sem_prepare(lock_t *l, wait_t *w, backend_op_t *op);
/* Redis granted w's permits (GRANTED) or found the earlier ones gone
 * (HOLD_GONE). */
void sem_granted(lock_t *l, wait_t *w);
void sem_hold_gone(lock_t *l, wait_t *w);
/* w's acquire got no answer (or was not acknowledged) but may have run:
 * it set the earlier ids to its lease, which may end before the hold's. */
void sem_unanswered(lock_t *l, const wait_t *w);
/* Lets a semaphore's waiters try, from the head (sem_kick's rule). */
void sem_kick(lock_t *l);
/* RELEASE <name> <permits>. */
void sem_release(lockmgr_t *m, lock_owner_t *o, lock_t *l, uint32_t permits);

/* fair.c */
/* Every waiter that is not waiting for a wake-up asks Redis, which keeps
 * the order: each takes its place in Redis's queue. */
void fair_kick(lock_t *l);
/* w's attempt: its place's length, and whether it takes one. */
void fair_prepare(lock_t *l, wait_t *w, backend_op_t *op);
/* Redis put w in its queue (TAKEN): keep the place, watch the head's channel. */
void fair_queued(lock_t *l, wait_t *w);
/* w stops waiting: its place goes (unless it was granted), and a new
 * head's channel is watched. Call before w leaves the queue. */
void fair_leave(lock_t *l, wait_t *w, int was_head);
/* The channel a fair lock's waiters are woken on: its local head's. */
void fair_watch(lock_t *l);
/* A new grant to owner makes older queued releases of it (of that mode) stale. */
void release_forget(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                    lock_mode_t mode);
/* A semaphore's grant to owner of ids 1..count: queued releases of those
 * ids are stale, of the ids above they still stand. */
void release_forget_permits(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                            uint32_t count);
/* Redis is back: send the queued releases. */
void release_resend(lockmgr_t *m);
/* Shutdown: send every queued release once more, counted. */
void release_flush_for_shutdown(lockmgr_t *m);
void release_free_all(lockmgr_t *m);

#endif
