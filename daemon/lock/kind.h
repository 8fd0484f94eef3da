/* The lock-kind interface: everything that differs between the kinds of lock, as one table per kind.
 * SPDX-License-Identifier: MIT
 *
 * Each kind is a file holding a lock_kind_t table: mutex.c, rwlock.c,
 * semaphore.c, fair.c, elect.c (with observe.c), multi.c; each request
 * mode belongs to one kind (lock_modes[], kind.c). The core (lockmgr.c,
 * wait.c, request.c, watchdog.c, release.c) calls the table and never
 * names a kind: a hook left NULL, a property left 0, is a mutex's way. A
 * kind reaches the core through the lock_* functions below and the
 * watchdog_* and release_* ones (internal.h); helpers some kinds share
 * have their own files: elect_read.h (whether an election leads a name),
 * redisq.h (waiters that queue in Redis).
 *
 * A kind's own state is never a core field. Per name, per queue and per
 * waiter it lives in the core struct's kind area (lock_area,
 * lock_queue_area, lock_wait_area: LOCK_KIND_*_AREA bytes, internal.h),
 * viewed as a struct of the kind's own that LOCK_KIND_AREA_FITS checks;
 * the rest in m->kind_state[its first mode], made on first use and freed
 * by its free_state. A request it tracks itself (not one wait) is a
 * PENDING_KIND pending, which its cancel and orphan hooks end.
 *
 * Adding a kind: a daemon/modes.h line for each of its modes, a row for
 * each in lock_modes[] and its table's name (kind.c), its file with its
 * table, its backend mode's row with its script (daemon/backend/scripts.c),
 * its code in daemon/backend/lua/part/kind.lua, its protocol words' rows (PROTO_CMD_MAP, proto/proto.h: shape, right,
 * usage); the rest of each word (verb, op, flags), its ERR KIND words and
 * its INFO counters are its table's. */
#ifndef DLOCK_LOCK_KIND_H
#define DLOCK_LOCK_KIND_H

#include <string.h>

#include "daemon/lock/internal.h"

struct statew_s;
struct stater_s;

/* How STATUS answers for a hold of the kind. */
typedef enum {
    LOCK_STATUS_EXCLUSIVE = 0, /* FREE, TAKEN <ttl>, MINE <holds> <ttl> <fence> */
    LOCK_STATUS_SHARED,        /* READ|WRITE <holders> <holds> <ttl> */
    LOCK_STATUS_PERMITS,       /* SEM <available> <held> */
    LOCK_STATUS_NONE           /* nothing holds it: FREE, as a free name */
} lock_status_form_t;

struct lock_kind_s {
    const char *name;          /* for logs */
    const lock_word_t *words;  /* its protocol words, up to one whose word is NULL */
    lock_kind_text_t text;     /* how ERR KIND names it */
    unsigned cap;              /* the BACKEND_CAP_* a topology needs for it; 0 any */
    backend_mode_t watch;      /* the channel its releases come on */
    lock_status_form_t status; /* STATUS's form */
    unsigned joins : 1;        /* an owner's new wait for a name it holds
                                  joins its hold (a semaphore's permits add
                                  to the owner's): no new hold to limit */
    unsigned no_holder : 1;    /* no one holder: WHO has none to name (ERR
                                  KIND), and local holds keep no waiter out,
                                  so a TIMEOUT tells Redis's TTL, not theirs */
    unsigned head_wakes : 1;   /* a wake-up lets only the queue's head try
                                  (the others wait for their turn in Redis) */
    unsigned holds_nothing : 1; /* its waits make no hold (a latch's AWAIT):
                                  no hold limit counts them, as they come
                                  or when they are answered */
    unsigned queues : 1;       /* an acquire Redis refuses takes a place in
                                  its queue, which BACKEND_LEAVE gives up */
    unsigned wake_one : 1;     /* an acquire Redis refuses puts this daemon in
                                  the name's wake queue, and a release that
                                  names another daemon (BACKEND_PASSED) is
                                  not a head of this kind's to try on */

    /* Waiting. */
    /* 1 if a local hold keeps a waiter of mode for o from trying; NULL:
     * any local hold does. */
    int (*blocked)(const lock_t *l, const lock_owner_t *o, lock_mode_t mode);
    /* Lets the waiters that may try now try (lock_attempt()). */
    void (*kick)(lock_t *l);
    /* Optional: fills what the kind adds to w's acquire. */
    void (*prepare)(lock_t *l, wait_t *w, backend_op_t *op);
    /* Optional: fills what the kind adds to a request's one backend call
     * (lock_op_new: a reentry, RENEW, its own requests). */
    void (*prepare_op)(lockmgr_t *m, backend_op_t *op);
    /* Redis granted w: a hold, and w's answer; NULL: lock_grant() with
     * the fence Redis gave. */
    void (*granted)(lock_t *l, wait_t *w);
    /* Optional: Redis refused w (TAKEN), before anything else is done. */
    void (*refused)(lock_t *l, wait_t *w);
    /* Redis refused w, a waiter that waits on: how it waits; NULL:
     * lock_wait_taken(), trying again at once if woken meanwhile. */
    void (*taken)(lock_t *l, wait_t *w, const backend_result_t *res);
    /* Optional: w, at the head with nothing here in its way, may try now:
     * the kind tries itself (a multi-name lock's place tries with the
     * set's others); NULL: lock_attempt(). */
    void (*attempt)(lock_t *l, wait_t *w);
    /* Optional: w's acquire got no answer after it had tried, and it waits
     * on. */
    void (*requeued)(lock_t *l, wait_t *w);
    /* Optional: w's acquire got no answer but may have run. */
    void (*unanswered)(lock_t *l, const wait_t *w);
    /* Optional: Redis found the owner's earlier holds gone (HOLD_GONE). */
    void (*hold_gone)(lock_t *l, wait_t *w);
    /* Undoes what w's acquire may have granted to owner; NULL: releases
     * the owner's holds of w's mode. */
    void (*undo)(lock_t *l, const wait_t *w, uint64_t owner);
    /* Optional: w stops waiting; was_head if it was the queue's head. */
    void (*leave)(lock_t *l, wait_t *w, int was_head);
    /* Optional: l's queue goes (its last waiter left, or lockmgr_free):
     * what the kind keeps in its area stops (its timers). */
    void (*queue_end)(lock_t *l);
    /* Optional: h's last count is given back, before Redis is told. */
    void (*released)(lock_t *l, hold_t *h);
    /* Optional: deletes everything h holds in Redis (release_hold_all()
     * where NULL). */
    void (*release_hold)(const hold_t *h);

    /* Requests: LOCK and TRYLOCK, UNLOCK; l may be NULL. Optional:
     * lock_acquire() and lock_unlock() serve where NULL. */
    void (*acquire)(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req);
    void (*unlock)(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req);
    /* Optional: a request only this kind has (SEMINIT), or one of
     * LOCK_VERB_LEADER and the others no other kind has. */
    void (*request)(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req);
    /* The own requests (bit op) that only give back what the owner has
     * (RESIGN, UNOBSERVE): request answers them whatever the name is, the
     * topology or the manager's state, with no ERR KIND. */
    unsigned own_any;
    /* Optional: the kind's own counters for INFO, at most cap into out:
     * how many (the same keys in the same order every time). */
    size_t (*stats)(const lockmgr_t *m, lock_stat_t *out, size_t cap);
    /* Optional: frees the kind's own state (m->kind_state at its first
     * mode), at lockmgr_free when the slot is not NULL. */
    void (*free_state)(lockmgr_t *m);
    /* Requests the kind tracks itself (PENDING_KIND, lock_pending_start_kind);
     * both are needed by a kind that starts one. CANCEL of p: answered ERR
     * CANCELLED (the core counts it), and nothing of it stays held. */
    void (*cancel)(pending_t *p);
    /* p's owner is gone (its pending is unlinked already): p ends without
     * an answer. */
    void (*orphan)(pending_t *p);
    /* Optional: o is being dropped, from outside its callbacks: what the
     * kind's own state keeps of it besides holds and waits goes (an
     * election's observations). Called when the slot is not NULL. */
    void (*owner_drop)(lockmgr_t *m, lock_owner_t *o);

    /* A live restore (handover.c): what the kind keeps besides holds and
     * waits, as records of words of its own. Optional: save_owner writes
     * what it keeps of o (an election's observations), save what it keeps
     * of no one owner (its counters); load reads one such record, its word
     * read already, for o (NULL for save's), and says 1 if the word was
     * its (errors go into r), 0 if not. The slot may be NULL in each. */
    void (*save_owner)(const lockmgr_t *m, const lock_owner_t *o, struct statew_s *w);
    void (*save)(const lockmgr_t *m, struct statew_s *w);
    int (*load)(lockmgr_t *m, lock_owner_t *o, const char *word, struct stater_s *r);
};

/* A kind's struct T fits an area of size bytes (LOCK_KIND_*_AREA), at
 * file scope beside T. */
#define LOCK_KIND_AREA_FITS(T, size)                                                     \
    _Static_assert(sizeof(T) <= (size) && _Alignof(T) <= LOCK_KIND_AREA_ALIGN,         \
                   #T " fits its area")

/* The areas the kinds keep their own state in (internal.h): a lock's, by
 * l->kind; a queue's, by its lock's kind; a waiter's, by its mode's kind. */
static inline void *lock_area(lock_t *l) {
    return l->kind_area;
}
static inline void *lock_queue_area(queue_t *q) {
    return q->kind_area;
}
/* The queue whose area this is (for a timer's callback). */
static inline queue_t *lock_queue_of_area(void *area) {
    return container_of(area, queue_t, kind_area);
}
static inline void *lock_wait_area(wait_t *w) {
    return w->kind_area;
}
static inline const void *lock_wait_area_c(const wait_t *w) {
    return w->kind_area;
}

/* l, in use by no one here, is k's from now: its area starts zero when
 * it was another kind's. Nothing while it is in use: it keeps its kind. */
static inline void lock_take_kind(lock_t *l, const lock_kind_t *k) {
    if (lock_in_use(l)) return;
    if (l->kind != k) memset(l->kind_area, 0, sizeof(l->kind_area));
    l->kind = k;
}

/* What each mode is: its kind, its backend mode. */
typedef struct lock_mode_info_s {
    const lock_kind_t *kind;
    lock_mode_t released_by;   /* the mode of the UNLOCK that releases it */
    unsigned shared : 1;       /* its holders share the lock: a waiter of the
                                  mode at the head goes with the others */
} lock_mode_info_t;

extern const lock_mode_info_t lock_modes[LOCK_MODE_COUNT];

static inline const lock_kind_t *lock_kind_of(lock_mode_t mode) {
    return lock_modes[mode].kind;
}

/* A mode's backend mode has its number (daemon/modes.h). */
static inline backend_mode_t lock_backend_mode(lock_mode_t mode) {
    return (backend_mode_t)mode;
}

/* Fills the fields every backend op of the lock manager's sets. */
static inline void lock_op_init(backend_op_t *op, backend_op_type_t kind, lock_mode_t mode,
                                const char *name, size_t len, uint64_t owner, backend_op_cb cb) {
    op->type = kind;
    op->mode = lock_backend_mode(mode);
    op->name = name;
    op->len = len;
    op->owner = owner;
    op->cb = cb;
}

/* The mode whose backend mode is bmode. */
static inline lock_mode_t lock_mode_of_backend(backend_mode_t bmode) {
    return (lock_mode_t)bmode;
}
/* The kind's first mode, which names it. */
lock_mode_t lock_kind_mode(const lock_kind_t *k);

/* ---- the core, for the kinds ------------------------------------------------------- */

/* Waiting (wait.c). */
void lock_attempt(lock_t *l, wait_t *w);
/* The kind's sharing rule, and its undo (or their defaults). */
int lock_blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode);
void lock_undo(lock_t *l, const wait_t *w, uint64_t owner);
/* CANCEL of w while its acquire is in flight: the undo goes now, right
 * behind the acquire (ops of one name keep their order), so that every
 * later request, of any connection, finds it undone; the acquire's answer
 * then undoes nothing more. Nothing if no acquire is in flight. */
void lock_wait_withdraw(wait_t *w);
/* Lets the kind's waiters try. */
void lock_kick(lock_t *l);
/* The head tries if nothing here holds it back and nothing is in flight. */
void lock_kick_head(lock_t *l);
/* Every waiter not waiting for a wake-up tries, up to
 * LOCKMGR_READS_INFLIGHT at once: for kinds whose waiters queue in Redis,
 * which keeps the order (fair locks, elections). */
void lock_kick_all(lock_t *l);
/* w, of a kind whose waiters queue in Redis, stops waiting: if it may
 * have taken a place there (Redis said TAKEN, an attempt is in flight, or
 * one got no answer), BACKEND_LEAVE gives it up, retried while Redis is
 * away as a release is (release_leave): a place left behind would hold
 * the name's queue up on every daemon until it ended, lease_ms later. */
void lock_leave_queue(lock_t *l, const wait_t *w);
/* A new hold for w with fence, and its answer. */
void lock_grant(lock_t *l, wait_t *w, uint64_t fence);
/* w waits on after Redis refused it: for a wake-up, or the holder's lease
 * (res->ttl_ms); may_retry: a wake-up came while it was in flight, so it
 * tries again at once. */
void lock_wait_taken(lock_t *l, wait_t *w, const backend_result_t *res, int may_retry);
wait_t *lock_queue_head(const lock_t *l);
/* Arms the retry turn: the holder's lease (ttl_ms, -1 none) ends. */
void lock_retry_at(lock_t *l, long long ttl_ms);
/* Takes w out of its queue; frees it unless its acquire is in flight. */
void lock_wait_end(wait_t *w);
/* A place for o at the end of l's queue, in mode, of the larger request
 * whole (its pending); it tries when the kind's kick says. Not counted as
 * a waiter: whole, which may have places in many queues, counts itself
 * once (waiting, lock_acct_waiting). NULL on no memory. The caller
 * answers. */
wait_t *lock_enqueue(lock_t *l, lock_owner_t *o, lock_mode_t mode, uint32_t lease_ms,
                     pending_t *whole);
/* Moves w (queued) ahead of the waiters that came after arrived_ns (its
 * request's arrival), short of one whose acquire is in flight: a request
 * that asks anew for one of its names keeps its place in the order of
 * arrival, as a multi-name wait must (multi.c). */
void lock_enqueue_in_order(wait_t *w, uint64_t arrived_ns);
/* The wake-ups of l's releases on channel mode (and owner's, 0: none). */
void lock_watch(lock_t *l, backend_mode_t mode, uint64_t owner);
void lock_unwatch(lock_t *l);

/* Requests (request.c): a wait or a reentry, and an UNLOCK of h's mode. */
void lock_acquire(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req);
void lock_unlock(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req);
/* One hold less of h (o's, on l) as UNLOCK gives it back: the holds left. */
long long lock_unlock_hold(lockmgr_t *m, lock_owner_t *o, lock_t *l, hold_t *h);
/* Queues o for l (LOCK, TRYLOCK), as the request's kind and mode say. */
void lock_start_wait(lockmgr_t *m, lock_owner_t *o, void *call, lock_verb_t verb,
                     lock_mode_t mode, const char *name, size_t len, uint32_t wait_ms,
                     uint32_t lease_ms, uint32_t count);
/* One backend call for o's request (internal.h's lock_op_t): done gets
 * its answer; NULL (answered) on no memory. Submit op->bop. */
lock_op_t *lock_op_new(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req,
                       backend_op_type_t kind, lock_mode_t mode, lock_op_done_cb done);

/* Holds and the table (lockmgr.c). */
hold_t *lock_hold_new(lock_t *l, lock_owner_t *o, uint64_t fence, uint32_t lease_ms,
                      lock_mode_t mode);
/* The holder can no longer count on the hold: tell it, drop it. */
void lock_hold_lost(hold_t *h, lock_loss_t why);
/* How long Redis may keep the hold after its last confirmation. */
uint32_t lock_hold_redis_lease(const hold_t *h);
/* The hold's last count is given back: Redis is told, the next waiter may go. */
void lock_release_local(hold_t *h);
void lock_maybe_free(lock_t *l);

/* Answers (lockmgr.c), each to one call of o's: the request being taken
 * (o->call_now, inside lockmgr_request) or a pending's (p->call). */
void lock_answer(lock_owner_t *o, void *call, const lock_reply_t *r);
void lock_answer_value(lock_owner_t *o, void *call, long long v);
void lock_answer_error(lockmgr_t *m, lock_owner_t *o, void *call, lock_err_t err,
                       lock_why_t why, long long limit);
/* ERR BACKEND with the backend's text. */
void lock_answer_backend(lockmgr_t *m, lock_owner_t *o, void *call, const char *text);
/* ERR KIND: name is held as mode's kind (why HELD_AS, RELEASE_AS,
 * NO_HOLDER). */
void lock_answer_kind(lockmgr_t *m, lock_owner_t *o, void *call, lock_why_t why,
                      lock_mode_t mode, const char *name, size_t len);
/* Tells o of ev through its event callback, unless o is dropped. */
void lock_tell(lock_owner_t *o, const lock_event_t *ev);
/* ERR NOTHELD, or ERR KIND when o holds l as another kind. */
void lock_answer_notheld(lockmgr_t *m, lock_owner_t *o, void *call, const lock_t *l,
                         lock_mode_t mode);

#endif
