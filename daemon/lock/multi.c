/* Multi-name locks: MLOCK, TRYMLOCK, MUNLOCK, a set of plain locks granted whole or not at all.
 * SPDX-License-Identifier: MIT
 *
 * A multi-name wait (mwait_t) takes a place (a wait_t of mode MULTI) at
 * the end of the queue of each name it does not hold yet, all at once, as
 * a LOCK would. The names' queues are first come first served, and every
 * wait enters all its queues in one step, so the places of any two waits
 * are in the same order in every queue they share: no cycle, so no
 * deadlock here. A place asked for anew (its name's hold ended while the
 * set waited) goes in the same order, ahead of the waiters that came
 * after the set, not at the end of its queue. A place at the head of its queue, with no hold of its
 * name here, does not try alone (the kind's attempt hook): the set tries,
 * in one script (mlock.lua), once every one of its places is at its
 * head, and then its names' queues wait for that one attempt. Waiters
 * behind a place wait while it waits for its other names, so a steady
 * stream of single-name lockers cannot starve it; a name may stay free
 * for the while. The script takes all the names or none (on Cluster
 * across slots, the backend undoes what it took), so the wait holds
 * nothing of its set while it waits. A refused set waits for a release
 * of the name that refused it (its channel, as a LOCK does) or the
 * refusing holder's lease, and tries again.
 *
 * A grant makes an ordinary plain-lock hold (LOCK_MODE_MUTEX) of each new
 * name, a reentry (one hold more) of each the connection held already;
 * each then lives on its own: UNLOCK, STATUS, WHO, the watchdog and
 * !LOST per name. A name held when the set came whose hold ends before
 * the grant (its lease, a loss, or Redis finding it gone: HOLD_GONE) is
 * asked for anew, from the end of its queue, as a LOCK of it would be. */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect_read.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* One name of a set. */
typedef struct mpart_s {
    lock_t *lock;              /* holds a busy reference while the set lives */
    wait_t *w;                 /* its place in the name's queue; NULL for a
                                  name the owner holds (a reentry) */
    int undone;                /* CANCEL came with the acquire in flight: its
                                  release went then (lock_wait_withdraw) */
} mpart_t;

typedef struct mwait_s {
    pending_t hdr;             /* PENDING_KIND, this kind's */
    lockmgr_t *mgr;
    lock_owner_t *owner;       /* NULL once answered (or its owner left) */
    uint64_t owner_id;
    int once;                  /* TRYMLOCK with wait 0: one try */
    int in_flight;             /* its acquire is in Redis now */
    int tried;                 /* Redis refused it at least once */
    int counted;               /* one request waiting (INFO waiters, the
                                  waiter limits), however many places */
    int refused;               /* Redis refused it: it waits for the name
                                  that refused it (which) ... */
    size_t which;              /* ... its release, or its lease's end */
    uint32_t lease_ms;         /* as asked: 0 watchdog */
    long long ttl_ms;          /* the longest holder's TTL seen, -1 unknown */
    uint64_t sent_at;
    uint64_t started_ns;
    timers_entry_t deadline;   /* TRYMLOCK's wait */
    timers_entry_t retry;      /* a grant not replicated in time, a hold
                                  lost: again soon */
    backend_op_t op;
    backend_op_t gone;         /* HOLD_GONE: why that hold went (a RENEW,
                                  which changes nothing of a gone hold) */
    size_t gone_which;         /* ... its name */
    uint64_t gone_grant;       /* ... the hold's grant_id */
    uint64_t gone_sent;
    size_t n;
    backend_name_t *names;     /* n, for the op */
    uint64_t *values;          /* n: the op's fences or holds */
    char *reentry;             /* n letters: 'r' a reentry, 'n' new; a string */
    election_read_t *kind_read; /* whether an election leads the name that
                                  first refused it (lock_read_election) */
    size_t read_which;         /* ... that name */
    mpart_t part[];
} mwait_t;

extern const lock_kind_t lock_kind_multi;

static void on_multi(backend_op_t *op);
static void multi_try(mwait_t *mw);
static void on_retry(timers_entry_t *t);
static int mwait_requeue_lost(mwait_t *mw);

static mwait_t *mwait_of(pending_t *p) {
    return container_of(p, mwait_t, hdr);
}

/* Frees the set once nothing of it is in flight. */
static void mwait_free(mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    timers_stop(m->timers, &mw->deadline);
    timers_stop(m->timers, &mw->retry);
    for (size_t i = 0; i < mw->n; i++) {
        lock_t *l = mw->part[i].lock;
        if (l == NULL) continue;
        l->busy--;
        lock_maybe_free(l);
    }
    free(mw);
}

/* The set counts as one request waiting while it has a place (its
 * places are lock_enqueue's, which counts none). */
static void mwait_count(mwait_t *mw, int waiting) {
    lockmgr_t *m = mw->mgr;
    if (waiting == mw->counted) return;
    mw->counted = waiting;
    if (waiting) m->waiting++;
    else m->waiting--;
    if (mw->owner != NULL) lock_acct_waiting(mw->owner, waiting ? 1 : -1);
}

/* The set stops waiting (answered already, or its owner left): its
 * places go; what is in flight is undone when it returns, unless CANCEL
 * withdrew it already (multi_cancel). */
static void mwait_end(mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    mwait_count(mw, 0);
    lock_pending_end(mw->owner, &mw->hdr);
    mw->owner = NULL;
    if (mw->kind_read != NULL) {
        lock_read_forget(mw->kind_read);
        mw->kind_read = NULL;
    }
    timers_stop(m->timers, &mw->deadline);
    timers_stop(m->timers, &mw->retry);
    for (size_t i = 0; i < mw->n; i++) {
        wait_t *w = mw->part[i].w;
        if (w == NULL || !w->queued) continue;
        /* one in flight stays until on_multi; the others are freed now */
        if (!w->in_flight) mw->part[i].w = NULL;
        lock_wait_end(w);
    }
    if (!mw->in_flight) mwait_free(mw);
}

/* One hold less of a name, never deleting it (a reentry undone). */
typedef struct mdrop_s {
    backend_op_t bop;
    lock_t *lock;              /* holds a busy reference */
} mdrop_t;

static void on_drop(backend_op_t *bop) {
    mdrop_t *d = container_of(bop, mdrop_t, bop);
    d->lock->busy--;
    lock_maybe_free(d->lock);
    free(d);
}

/* Undoes what the set's acquire granted: the new names are released
 * (unless their places' ends did), the reentries lose the hold they
 * gained (granted: 1 when Redis said so; else it only may have run, and a
 * reentry is left one hold more in Redis, which its last release deletes
 * anyway). A reentry whose hold ended here meanwhile is released whole:
 * nothing of it is held. */
static void mwait_undo(mwait_t *mw, int granted) {
    lockmgr_t *m = mw->mgr;
    for (size_t i = 0; i < mw->n; i++) {
        lock_t *l = mw->part[i].lock;
        if (mw->reentry[i] == 'n') {
            if (mw->part[i].undone) continue;
            release_all(m, l->name, l->len, mw->owner_id, mw->op.lease_ms, LOCK_MODE_MUTEX);
            continue;
        }
        if (mw->owner != NULL && lock_hold_of(l, mw->owner, LOCK_MODE_MUTEX) == NULL) {
            release_all(m, l->name, l->len, mw->owner_id, mw->op.lease_ms, LOCK_MODE_MUTEX);
            continue;
        }
        mdrop_t *d = granted ? zalloc(sizeof(*d)) : NULL;
        if (d == NULL) continue;
        d->lock = l;
        l->busy++;
        lock_op_init(&d->bop, BACKEND_DROP, LOCK_MODE_MUTEX, l->name, l->len, mw->owner_id,
                     on_drop);
        backend_submit(m->backend, &d->bop);
    }
}

/* ---- trying --------------------------------------------------------------------------- */

/* 1 if every name of the set may try now: each place at its queue's head
 * with nothing here holding its name or trying it, and Redis there. */
static int mwait_ready(const mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    if (mw->in_flight || mw->owner == NULL || m->stopping) return 0;
    for (size_t i = 0; i < mw->n; i++) {
        const lock_t *l = mw->part[i].lock;
        const wait_t *w = mw->part[i].w;
        if (!backend_available(m->backend, l->name, l->len)) return 0;
        if (w == NULL) continue;
        if (lock_queue_head(l) != w || l->attempts != 0 || !LIST_EMPTY(&l->holds) ||
            l->q->yielding)
            return 0;
    }
    return 1;
}

/* 1 if a name the set counts as held (no place of its own) is held here
 * no more. */
static int mwait_lost_hold(const mwait_t *mw) {
    for (size_t i = 0; i < mw->n; i++)
        if (mw->part[i].w == NULL &&
            lock_hold_of(mw->part[i].lock, mw->owner, LOCK_MODE_MUTEX) == NULL)
            return 1;
    return 0;
}

static void multi_try(mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    if (mw->in_flight || mw->owner == NULL || m->stopping) return;
    if (mwait_lost_hold(mw)) {
        /* A name held when the set came whose hold has ended here may not
         * go as a reentry: Redis, whose lease counts from when it ran,
         * could still grant it. It takes a place first, from a timer: this
         * may run inside a kick, where no answer (ERR KIND, a limit) may
         * come. */
        timers_start(m->timers, &mw->retry, 0, on_retry);
        return;
    }
    if (!mwait_ready(mw)) return;
    for (size_t i = 0; i < mw->n; i++) {
        wait_t *w = mw->part[i].w;
        mw->reentry[i] = w != NULL ? 'n' : 'r';
        if (w == NULL) continue;
        lock_t *l = mw->part[i].lock;
        l->attempts++;
        w->woken = 0;
        w->in_flight = 1;
        LIST_INSERT_HEAD(&l->flying, w, flight);
    }
    mw->in_flight = 1;
    mw->refused = 0;
    mw->sent_at = timers_now(m->timers);
    backend_op_t *op = &mw->op;
    lock_op_init(op, BACKEND_ACQUIRE, LOCK_MODE_MULTI, mw->names[0].name, mw->names[0].len,
                 mw->owner_id, on_multi);
    op->names = mw->names;
    op->nnames = mw->n;
    op->reentry = mw->reentry;
    op->values = mw->values;
    op->lease_ms = mw->lease_ms ? mw->lease_ms : m->conf->lease_ms;
    backend_submit(m->backend, op);
}

/* The kind's attempt hook: a place came to its queue's head, or its name
 * was released. A set Redis refused tries again only for the name that
 * refused it: a release of another of its names is no news, and may be
 * its own (on Cluster, the undo of a part taken in another slot, which
 * would wake it again and again). */
static void multi_attempt(lock_t *l, wait_t *w) {
    if (w->owner == NULL || w->whole == NULL) return;
    mwait_t *mw = mwait_of(w->whole);
    if (mw->refused && mw->part[mw->which].lock != l) return;
    multi_try(mw);
}

/* The set goes on: its names whose holds ended here take places first
 * (which may answer it), then it tries. */
static void mwait_go_on(mwait_t *mw) {
    if (mwait_requeue_lost(mw)) return;
    multi_try(mw);
}

static void on_retry(timers_entry_t *t) {
    mwait_go_on(container_of(t, mwait_t, retry));
}

/* ---- answers -------------------------------------------------------------------------- */

static long long mwait_ttl(const mwait_t *mw);

/* Every name the set counted as held (no place of its own) whose hold has
 * ended here is asked for anew, from the end of its queue, as a LOCK of
 * it would be: ERR KIND if it is another kind's now, and the waiter
 * limits if the set did not wait yet; a TRYMLOCK of 0, which tries once,
 * has had its try: TIMEOUT. 1 when that answered the set (it is over);
 * never while its acquire is in flight. */
static int mwait_requeue_lost(mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    lock_owner_t *o = mw->owner;
    if (o == NULL || mw->in_flight) return 0;
    for (size_t i = 0; i < mw->n; i++) {
        mpart_t *p = &mw->part[i];
        lock_t *l = p->lock;
        if (p->w != NULL || lock_hold_of(l, o, LOCK_MODE_MUTEX) != NULL) continue;
        lock_why_t why = LOCK_WHY_NONE;
        if (mw->once) {
            lock_answer_timeout(m, o, mw->hdr.call, mwait_ttl(mw));
            mwait_end(mw);
            return 1;
        }
        if (lock_in_use(l) && l->kind != lock_kind_of(LOCK_MODE_MUTEX)) {
            lock_answer_kind(m, o, mw->hdr.call, LOCK_WHY_HELD_AS, lock_kind_mode(l->kind), l->name,
                             l->len);
            mwait_end(mw);
            return 1;
        }
        if (!mw->counted && m->waiting >= m->conf->max_waiters) why = LOCK_WHY_MAX_WAITERS;
        else if (!mw->counted) why = lock_acct_new_wait(m, o);
        if (why == LOCK_WHY_NONE) {
            lock_take_kind(l, lock_kind_of(LOCK_MODE_MUTEX));
            p->w = lock_enqueue(l, o, LOCK_MODE_MULTI, mw->lease_ms, &mw->hdr);
            if (p->w == NULL) {
                why = LOCK_WHY_NOMEM;
            } else {
                /* Ahead of the sets that came after this one: at the end it
                 * could wait behind one that waits behind it elsewhere. */
                lock_enqueue_in_order(p->w, mw->started_ns);
            }
        }
        if (why != LOCK_WHY_NONE) {
            lock_answer_error(m, o, mw->hdr.call, LOCK_ERR_LIMIT, why, 0);
            mwait_end(mw);
            return 1;
        }
        mwait_count(mw, 1);
        /* The set waits for this place now, behind whoever is ahead of it
         * here: its coming to the head is news, whatever name refused the
         * set last (multi_attempt would take it for none). */
        mw->refused = 0;
    }
    return 0;
}

static void mwait_grant(mwait_t *mw) {
    lockmgr_t *m = mw->mgr;
    lock_owner_t *o = mw->owner;
    size_t made = 0, fresh = 0;
    for (size_t i = 0; i < mw->n; i++) fresh += mw->reentry[i] == 'n';
    if (mwait_lost_hold(mw)) {
        /* A name sent as a reentry lost its hold here meanwhile (its lease
         * ran out, the watchdog gave it up), yet Redis, counting the lease
         * from when it ran, still had it. No hold to count one more on,
         * and no fresh one either: the loss's release is on its way behind
         * the script and deletes the name. So the grant is undone and the
         * name asked for anew. */
        mwait_undo(mw, 1);
        mwait_go_on(mw);
        return;
    }
    /* Limits are checked as the request came; other requests of the uid
     * may have been granted since. */
    lock_why_t why = lock_acct_room(m, o, fresh);
    if (why != LOCK_WHY_NONE) {
        mwait_undo(mw, 1);
        lock_answer_error(m, o, mw->hdr.call, LOCK_ERR_LIMIT, why, 0);
        mwait_end(mw);
        return;
    }
    for (; made < mw->n; made++) {
        if (mw->reentry[made] != 'n') continue;
        lock_t *l = mw->part[made].lock;
        hold_t *h = lock_hold_new(l, o, mw->values[made], mw->lease_ms, LOCK_MODE_MUTEX);
        if (h == NULL) break;
        m->stats.grants++;
        release_forget(m, l->name, l->len, o->id, LOCK_MODE_MUTEX);
        watchdog_set_confirmed(h, mw->sent_at, mw->op.lease_ms);
    }
    if (made < mw->n) {
        /* No memory for one of them: none is kept. */
        for (size_t i = 0; i < made; i++) {
            hold_t *h = lock_hold_of(mw->part[i].lock, o, LOCK_MODE_MUTEX);
            if (mw->reentry[i] == 'n' && h != NULL) lock_hold_drop(h);
        }
        mwait_undo(mw, 1);
        lock_answer_error(m, o, mw->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        mwait_end(mw);
        return;
    }
    histo_add(&m->wait_time, (uv_hrtime() - mw->started_ns) / 1000);
    for (size_t i = 0; i < mw->n; i++) {
        if (mw->reentry[i] != 'r') continue;
        /* Redis only lengthened its lease: its deadlines stand. */
        hold_t *h = lock_hold_of(mw->part[i].lock, o, LOCK_MODE_MUTEX);
        h->count++;
        m->stats.reentries++;
        mw->values[i] = h->fence;
    }
    lock_reply_t r = {.type = LOCK_REPLY_LIST, .list = mw->values, .count = mw->n};
    for (size_t i = 0; i < mw->n; i++)
        if (mw->part[i].w != NULL) mw->part[i].w->granted = 1;
    lock_answer(o, mw->hdr.call, &r);
    mwait_end(mw);
}

/* The holder's TTL to tell a TRYMLOCK that timed out: a local holder's,
 * else the longest Redis said. */
static long long mwait_ttl(const mwait_t *mw) {
    long long ttl = mw->tried ? mw->ttl_ms : -1;
    for (size_t i = 0; i < mw->n; i++) {
        const lock_t *l = mw->part[i].lock;
        if (mw->part[i].w != NULL && !LIST_EMPTY(&l->holds)) {
            long long t = lock_local_ttl(l);
            if (t > ttl) ttl = t;
        }
    }
    return ttl;
}

static void on_deadline(timers_entry_t *t) {
    mwait_t *mw = container_of(t, mwait_t, deadline);
    lock_answer_timeout(mw->mgr, mw->owner, mw->hdr.call, mwait_ttl(mw));
    mwait_end(mw);
}

/* The name that first refused the set may be an election led from
 * another daemon (mutex.c says why): then the set ends with ERR KIND, as
 * on the leader's own daemon. */
static void on_set_read(void *data, int leads) {
    mwait_t *mw = data;
    mw->kind_read = NULL;
    if (!leads || mw->owner == NULL || mw->mgr->stopping) return;
    /* As a CANCEL: an acquire in flight is undone right behind it. */
    for (size_t i = 0; i < mw->n; i++)
        if (mw->part[i].w != NULL) lock_wait_withdraw(mw->part[i].w);
    const backend_name_t *nm = &mw->names[mw->read_which];
    lock_answer_kind(mw->mgr, mw->owner, mw->hdr.call, LOCK_WHY_HELD_AS, LOCK_MODE_ELECT, nm->name,
                     nm->len);
    mwait_end(mw);
}

/* Redis refused the set: it waits for a release of one of its names, or
 * the refusing holder's lease. Its first refusal reads what that name is
 * (on_set_read). */
static void mwait_taken(mwait_t *mw, const backend_result_t *res, int woken) {
    if (!mw->tried && mw->kind_read == NULL) {
        const backend_name_t *nm = &mw->names[res->which];
        mw->read_which = res->which;
        mw->kind_read = lock_read_election(mw->mgr, nm->name, nm->len, on_set_read, mw);
    }
    mw->tried = 1;
    mw->refused = 1;
    mw->which = res->which;
    if (woken) {
        multi_try(mw);
        return;
    }
    for (size_t i = 0; i < mw->n; i++) {
        lock_t *l = mw->part[i].lock;
        if (mw->part[i].w == NULL) continue;
        mw->part[i].w->parked = 1;
        /* Once in force, the watch's confirmation brings one more try. */
        if (!l->q->subscribed) lock_watch(l, BACKEND_MUTEX, 0);
    }
    lock_t *l = mw->part[res->which].lock;
    if (mw->part[res->which].w != NULL) lock_retry_at(l, res->ttl_ms);
}

/* Why the hold Redis found gone went: the RENEW's answer. FORCED: the
 * FORCEUNLOCK marker names the owner; GONE (or no answer): it expired or
 * was deleted. Its !LOST comes before any grant of the set, which waits
 * for this; then the waiters here that it held back may go, and the set
 * asks for the name anew behind them. */
static void on_gone(backend_op_t *bop) {
    mwait_t *mw = container_of(bop, mwait_t, gone);
    lockmgr_t *m = mw->mgr;
    const backend_result_t *res = &bop->res;
    mw->in_flight = 0;
    if (mw->owner == NULL || m->stopping) {
        if (mw->owner != NULL)
            lock_answer_error(m, mw->owner, mw->hdr.call, LOCK_ERR_BACKEND, LOCK_WHY_SHUTDOWN, 0);
        mwait_end(mw);
        return;
    }
    lock_t *l = mw->part[mw->gone_which].lock;
    hold_t *h = lock_hold_of(l, mw->owner, LOCK_MODE_MUTEX);
    if (h != NULL && h->grant_id == mw->gone_grant) {
        if (res->status == BACKEND_OK && res->renewal == BACKEND_RENEWED) {
            /* Redis has it after all (the set's answer was not mlock.lua's):
             * it stays, renewed, and the set tries again soon. */
            watchdog_set_confirmed(h, mw->gone_sent, bop->lease_ms);
            timers_start(m->timers, &mw->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
            return;
        }
        lock_hold_lost(h, res->status == BACKEND_OK && res->renewal == BACKEND_FORCED
                              ? LOCK_LOST_FORCED
                              : LOCK_LOST_EXPIRED);
        lock_kick(l);
    }
    mwait_go_on(mw);
}

static void mwait_ask_gone(mwait_t *mw, size_t which, const hold_t *h) {
    lockmgr_t *m = mw->mgr;
    lock_t *l = mw->part[which].lock;
    backend_op_t *op = &mw->gone;
    mw->gone_which = which;
    mw->gone_grant = h->grant_id;
    mw->gone_sent = timers_now(m->timers);
    mw->in_flight = 1;
    memset(op, 0, sizeof(*op));
    lock_op_init(op, BACKEND_RENEW, LOCK_MODE_MUTEX, l->name, l->len, mw->owner_id, on_gone);
    op->count = h->count;
    op->lease_ms = lock_hold_redis_lease(h);
    backend_submit(m->backend, op);
}

static void on_multi(backend_op_t *op) {
    mwait_t *mw = container_of(op, mwait_t, op);
    lockmgr_t *m = mw->mgr;
    const backend_result_t *res = &op->res;
    int woken = 0; /* a release of the name Redis answered about */
    mw->in_flight = 0;
    for (size_t i = 0; i < mw->n; i++) {
        wait_t *w = mw->part[i].w;
        if (w == NULL || !w->in_flight) continue;
        lock_t *l = mw->part[i].lock;
        LIST_REMOVE(w, flight);
        w->in_flight = 0;
        l->attempts--;
        if (i == res->which) woken |= w->woken;
        if (!w->queued) { /* its place ended meanwhile */
            mw->part[i].undone = w->undone;
            pool_put(&m->wait_pool, w);
            mw->part[i].w = NULL;
        }
        if (m->stopping) lockmgr_shutdown_step(m);
    }
    int ran = res->status == BACKEND_OK ? res->outcome == BACKEND_GRANTED
                                        : res->status != BACKEND_FAILED;
    if (mw->owner == NULL || m->stopping) {
        if (ran) mwait_undo(mw, res->status == BACKEND_OK);
        if (mw->owner != NULL) lock_answer_error(m, mw->owner, mw->hdr.call, LOCK_ERR_BACKEND,
                                                 LOCK_WHY_SHUTDOWN, 0);
        for (size_t i = 0; i < mw->n; i++) lock_kick(mw->part[i].lock);
        mwait_end(mw);
        return;
    }
    lock_owner_t *o = mw->owner;
    if (res->status != BACKEND_OK) {
        if (ran) mwait_undo(mw, 0);
        int queued = 0;
        for (size_t i = 0; i < mw->n; i++) queued |= mw->part[i].w != NULL;
        if (res->status == BACKEND_UNACKED && !mw->once) {
            timers_start(m->timers, &mw->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
            return;
        }
        if (mw->tried && queued && res->status == BACKEND_DOWN) return; /* Redis back: kicked */
        lock_answer_backend(m, o, mw->hdr.call, res->error);
        mwait_end(mw);
        return;
    }
    const backend_name_t *at = &mw->names[res->which];
    switch (res->outcome) {
    case BACKEND_GRANTED:
        mwait_grant(mw);
        return;
    case BACKEND_TAKEN:
        if (res->ttl_ms > mw->ttl_ms || res->ttl_ms == -1) mw->ttl_ms = res->ttl_ms;
        if (mw->once) {
            lock_answer_timeout(m, o, mw->hdr.call, res->ttl_ms);
            mwait_end(mw);
            return;
        }
        mwait_taken(mw, res, woken);
        return;
    case BACKEND_WRONG_KIND:
        lock_answer_kind(m, o, mw->hdr.call, LOCK_WHY_HELD_AS, lock_mode_of_backend(res->held),
                         at->name,
                         at->len);
        mwait_end(mw);
        return;
    case BACKEND_REENTERED:
        /* A stale field of this owner (a release not through yet): clear
         * it, then try again behind it. */
        release_all(m, at->name, at->len, mw->owner_id, mw->op.lease_ms, LOCK_MODE_MUTEX);
        multi_try(mw);
        return;
    case BACKEND_HOLD_GONE: {
        /* A name held here is gone in Redis: the hold is lost (why, a
         * RENEW of it tells first), and the name is asked for anew. */
        hold_t *h = lock_hold_of(mw->part[res->which].lock, o, LOCK_MODE_MUTEX);
        if (mw->reentry[res->which] != 'r') {
            /* Said of a new name: not mlock.lua's answer (a reply rewritten
             * on its way), and it may hide a grant. Undone; tried again
             * soon, as wait.c does for a single name. */
            mwait_undo(mw, 0);
            if (mw->once) {
                lock_answer_backend(m, o, mw->hdr.call, LOCK_UNEXPECTED_HOLD_GONE);
                mwait_end(mw);
                return;
            }
            timers_start(m->timers, &mw->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
            return;
        }
        if (h != NULL) {
            mwait_ask_gone(mw, res->which, h);
            return;
        }
        /* its lease ended here meanwhile: told already */
        mwait_go_on(mw);
        return;
    }
    }
}

/* ---- requests ------------------------------------------------------------------------- */

/* The kind's cancel hook: CANCEL of the set. */
static void multi_cancel(pending_t *pending) {
    mwait_t *mw = mwait_of(pending);
    /* What its acquire may grant is undone right behind it, before CANCEL
     * is answered: no later request sees a name of the set held. */
    for (size_t i = 0; i < mw->n; i++)
        if (mw->part[i].w != NULL) lock_wait_withdraw(mw->part[i].w);
    lock_answer_error(mw->mgr, mw->owner, mw->hdr.call, LOCK_ERR_CANCELLED, LOCK_WHY_NONE, 0);
    mwait_end(mw);
}

/* The kind's orphan hook: the set's owner is gone. */
static void multi_orphan(pending_t *pending) {
    mwait_end(mwait_of(pending));
}

/* An error about the set's name i, or 0 when the set may wait. */
static int mlock_refused(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req,
                         size_t *fresh) {
    *fresh = 0;
    for (size_t i = 0; i < req->nnames; i++) {
        const lock_name_t *nm = &req->names[i];
        lock_t *l = lock_find(m, nm->name, nm->len);
        if (lock_in_use(l) && l->kind != lock_kind_of(LOCK_MODE_MUTEX)) {
            lock_answer_kind(m, o, o->call_now, LOCK_WHY_HELD_AS, lock_kind_mode(l->kind), nm->name,
                             nm->len);
            return 1;
        }
        if (!backend_available(m->backend, nm->name, nm->len)) {
            lock_answer_unavailable(m, o, o->call_now, nm->name, nm->len);
            return 1;
        }
        if (lock_hold_of(l, o, LOCK_MODE_MUTEX) == NULL) (*fresh)++;
    }
    lock_why_t why = LOCK_WHY_NONE;
    if (req->nnames > m->conf->max_locks_per_client ||
        o->held_count + *fresh > m->conf->max_locks_per_client)
        why = LOCK_WHY_MAX_LOCKS;
    else if (*fresh > 0 && m->waiting >= m->conf->max_waiters)
        why = LOCK_WHY_MAX_WAITERS;
    else if (*fresh > 0 && (why = lock_acct_new_holds(m, o, *fresh)) == LOCK_WHY_NONE)
        why = lock_acct_new_wait(m, o);
    if (why != LOCK_WHY_NONE) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, why, 0);
        return 1;
    }
    uint32_t max = m->backend->lease_max_ms;
    if (max && req->lease_ms > max) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_LEASE_MAX, max);
        return 1;
    }
    return 0;
}

/* 1 if a one-try TRYMLOCK would go ahead of someone here: it answers
 * TIMEOUT at once, as TRYLOCK 0 does. */
static int once_blocked(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    long long ttl = -1;
    int blocked = 0;
    for (size_t i = 0; i < req->nnames; i++) {
        lock_t *l = lock_find(m, req->names[i].name, req->names[i].len);
        if (l == NULL || lock_hold_of(l, o, LOCK_MODE_MUTEX) != NULL) continue;
        if (!LIST_EMPTY(&l->holds) || lock_queue_head(l) != NULL || l->attempts != 0) {
            long long t = lock_local_ttl(l);
            blocked = 1;
            if (t > ttl) ttl = t;
        }
    }
    if (blocked) lock_answer_timeout(m, o, o->call_now, ttl);
    return blocked;
}

static void mlock(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    size_t n = req->nnames, fresh;
    if (n == 0 || n > LOCKMGR_MNAMES_MAX) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    if (mlock_refused(m, o, req, &fresh)) return;
    int once = req->verb == LOCK_VERB_TRYMLOCK && req->wait_ms == 0;
    if (once && once_blocked(m, o, req)) return;
    mwait_t *mw = zalloc(sizeof(*mw) + n * (sizeof(mpart_t) + sizeof(backend_name_t) +
                                            sizeof(uint64_t) + 1) + 1);
    if (mw == NULL) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        return;
    }
    mw->names = (backend_name_t *)(mw->part + n);
    mw->values = (uint64_t *)(mw->names + n);
    mw->reentry = (char *)(mw->values + n);
    mw->mgr = m;
    lock_pending_start_kind(o, &mw->hdr, &lock_kind_multi, o->call_now);
    mw->owner = o;
    mw->owner_id = o->id;
    mw->once = once;
    mw->lease_ms = req->lease_ms;
    mw->ttl_ms = -1;
    mw->started_ns = uv_hrtime();
    mw->n = n;
    for (size_t i = 0; i < n; i++) {
        lock_t *l = lock_get(m, req->names[i].name, req->names[i].len);
        if (l == NULL) goto nomem;
        l->busy++;
        mw->part[i].lock = l;
        mw->names[i].name = l->name;
        mw->names[i].len = l->len;
        if (lock_hold_of(l, o, LOCK_MODE_MUTEX) != NULL) continue;
        lock_take_kind(l, lock_kind_of(LOCK_MODE_MUTEX));
        if ((mw->part[i].w = lock_enqueue(l, o, LOCK_MODE_MULTI, req->lease_ms, &mw->hdr)) == NULL)
            goto nomem;
        mw->part[i].w->started_ns = mw->started_ns;
        mwait_count(mw, 1);
    }
    if (req->verb == LOCK_VERB_TRYMLOCK && req->wait_ms > 0)
        timers_start(m->timers, &mw->deadline, req->wait_ms, on_deadline);
    multi_try(mw);
    return;
nomem:
    lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
    mwait_end(mw);
}

/* MUNLOCK's answer comes at once, read after lockmgr_request() returns:
 * its numbers live in the kind's state (m->kind_state), made by the first
 * MUNLOCK, until the next one. */
static uint64_t *munlock_buf(lockmgr_t *m) {
    if (m->kind_state[LOCK_MODE_MULTI] == NULL)
        m->kind_state[LOCK_MODE_MULTI] = malloc(LOCKMGR_MNAMES_MAX * sizeof(uint64_t));
    return m->kind_state[LOCK_MODE_MULTI];
}

static void multi_free_state(lockmgr_t *m) {
    free(m->kind_state[LOCK_MODE_MULTI]);
    m->kind_state[LOCK_MODE_MULTI] = NULL;
}

static void munlock(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    hold_t *hold[LOCKMGR_MNAMES_MAX];
    size_t n = req->nnames;
    if (n == 0 || n > LOCKMGR_MNAMES_MAX) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    /* Every name first: if one is not held, nothing is released. */
    for (size_t i = 0; i < n; i++) {
        const lock_name_t *nm = &req->names[i];
        lock_t *l = lock_find(m, nm->name, nm->len);
        hold[i] = lock_hold_of(l, o, LOCK_MODE_MUTEX);
        if (hold[i] != NULL) continue;
        const hold_t *other = lock_hold_mine(l, o);
        if (other != NULL) {
            lock_answer_kind(m, o, o->call_now, LOCK_WHY_RELEASE_AS, other->mode, nm->name,
                             nm->len);
            return;
        }
        lock_reply_t r = {.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_NOTHELD,
                          .name = nm->name, .len = nm->len};
        lock_answer(o, o->call_now, &r);
        return;
    }
    uint64_t *left = munlock_buf(m);
    if (left == NULL) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        return;
    }
    for (size_t i = 0; i < n; i++)
        left[i] = (uint64_t)lock_unlock_hold(m, o, hold[i]->lock, hold[i]);
    lock_reply_t r = {.type = LOCK_REPLY_LIST, .list = left, .count = n};
    lock_answer(o, o->call_now, &r);
}

static void multi_request(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    (void)l;
    if (req->verb == LOCK_VERB_MUNLOCK) munlock(m, o, req);
    else mlock(m, o, req);
}

/* A place withdrawn while the set's acquire was in flight
 * (lock_wait_withdraw): the name, new to its owner, is released as a
 * plain lock's. */
static void multi_undo_place(lock_t *l, const wait_t *w, uint64_t owner) {
    release_all(l->mgr, l->name, l->len, owner, w->lease_ms, LOCK_MODE_MUTEX);
}

/* The kind serves the requests only: the holds it makes are plain
 * locks', and its places in the names' queues wait as theirs do. */
/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t multi_words[] = {
    {"MLOCK", LOCK_VERB_MLOCK, LOCK_MODE_MULTI, 0, LOCK_WORD_AS_LOCK},
    {"TRYMLOCK", LOCK_VERB_TRYMLOCK, LOCK_MODE_MULTI, 0, LOCK_WORD_AS_TRYLOCK},
    {"MUNLOCK", LOCK_VERB_MUNLOCK, LOCK_MODE_MULTI, 0, LOCK_WORD_AS_UNLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_multi = {
    .name = "multi",
    .words = multi_words,
    .text = {"held as a plain lock (LOCK, UNLOCK)",
             "held as a plain lock: UNLOCK releases it", "multi-name locks"},
    .cap = BACKEND_CAP_MULTI,
    .watch = BACKEND_MUTEX,
    .status = LOCK_STATUS_EXCLUSIVE,
    .kick = lock_kick_head,
    .attempt = multi_attempt,
    .undo = multi_undo_place,
    .request = multi_request,
    .cancel = multi_cancel,
    .orphan = multi_orphan,
    .free_state = multi_free_state,
};
