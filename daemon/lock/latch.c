/* Count-down latches: a count in Redis that waiters wait to see reach 0, as Redisson's RCountDownLatch.
 * SPDX-License-Identifier: MIT
 *
 * The protocol (PROTOCOL.md, "Count-down latches"):
 *   LATCHSET <name> <count>  sets the count unless the latch exists: 1, or 0
 *   COUNTDOWN <name>         one less: the count left; at 0 the latch is gone
 *                            and every waiter, here or anywhere, goes
 *   AWAIT <name>             waits until the count is 0 (none counts as 0)
 *   TRYAWAIT <name> [<ms>]   ... at most ms: TIMEOUT <count> otherwise
 *   LATCHCOUNT <name>        the count, 0 when there is none
 * A latch has no holder, no lease and no fence: nothing here makes a
 * hold. What Redis keeps is latch.lua's (Redisson's layout: the count is
 * a string under the name's key, changes go out on
 * redisson_countdownlatch__channel__{key}: '1' set, '0' reached zero).
 *
 * AWAIT and TRYAWAIT are the kind's LOCK and TRYLOCK (the latch's
 * acquire hook): a wait in the name's queue, through the core's waiting
 * (wait.c), whose "attempt" is a look at the count (BACKEND_ACQUIRE,
 * latch.lua's 'a': GRANTED when it is 0, else TAKEN with the count as its
 * value, where a lock's says its holder's lease). Nothing here blocks a
 * waiter, and one look serves every waiter queued when it went: it goes
 * for the queue's last waiter, one at a time (latch_kick), and its
 * answer is every earlier waiter's too (latch_granted, latch_refused). A
 * waiter that came while a look was in flight looks again itself: the
 * look may have run before it asked (a LATCHSET of its own connection's
 * in between must not be missed). Refused, the waiters wait for a message
 * on the latch's channel (lock_watch, our wake-ups), re-read the count on
 * each, and once a second besides (LOCKMGR_NO_TTL_RETRY_MS: a count
 * someone deleted by hand publishes nothing).
 *
 * LATCHSET, COUNTDOWN and LATCHCOUNT are its own requests (LOCK_VERB_OWN,
 * lock_request_t.op a LATCH_OP_*), one backend call each: BACKEND_INIT,
 * BACKEND_RELEASE and BACKEND_STATUS of mode LATCH, all on latch.lua.
 *
 * Besides this file the kind is a line of daemon/modes.h, its row in
 * kind.c's lock_modes[], its row in backend/scripts.c's mode table with
 * backend/lua/latch.lua, its code and mark in backend/lua/part/kind.lua,
 * and its words' rows in proto/proto.h's PROTO_CMD_MAP (shape, right,
 * usage); the rest of each word, and its ERR KIND words, are below. */
#include "daemon/lock/kind.h"

/* The latch's own requests (lock_request_t.op; latch_words names them). */
enum {
    LATCH_OP_SET = 0,        /* LATCHSET <name> <count> (req->count) */
    LATCH_OP_COUNTDOWN = 1,  /* COUNTDOWN <name> */
    LATCH_OP_COUNT = 2       /* LATCHCOUNT <name> */
};

/* The largest count LATCHSET takes (the protocol's largest number). */
#define LATCH_COUNT_MAX 2147483647u

/* Nothing here blocks a latch's waiter: Redis has the count. */
static int latch_blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    (void)l;
    (void)o;
    (void)mode;
    return 0;
}

/* One look at a time, for the queue's last waiter: it answers for every
 * waiter queued before it. It goes when some waiter is not waiting for a
 * message (a new one, or all of them after a wake-up). */
static void latch_kick(lock_t *l) {
    wait_t *w;
    if (l->attempts > 0) return;
    TAILQ_FOREACH(w, &l->q->waiters, link) {
        if (!w->parked) {
            lock_attempt(l, TAILQ_LAST(&l->q->waiters, wait_list_s));
            return;
        }
    }
}

/* The waiters from the head up to w (the look's) all wait for the next
 * message: an end among them, which kicks, starts no look for them. */
static void park_up_to(lock_t *l, wait_t *w) {
    wait_t *x;
    TAILQ_FOREACH(x, &l->q->waiters, link) {
        x->parked = 1;
        if (x == w) return;
    }
}

/* The count is 0: w and every waiter queued before it go, OK 0. */
static void latch_granted(lock_t *l, wait_t *w) {
    wait_t *x, *next;
    park_up_to(l, w);
    for (x = TAILQ_FIRST(&l->q->waiters); x != NULL; x = next) {
        next = x == w ? NULL : TAILQ_NEXT(x, link);
        x->granted = 1;
        lock_answer_value(x->owner, x->hdr.call, 0);
        lock_wait_end(x);
    }
}

/* The count is not 0 (w's TAKEN, its value the count): the waiters
 * before w learn it too; a TRYAWAIT of one look among them answers
 * TIMEOUT <count>; the core then does w's part (latch_taken, or its
 * TIMEOUT). */
static void latch_refused(lock_t *l, wait_t *w) {
    long long count = w->acquire.res.ttl_ms;
    wait_t *x, *next;
    park_up_to(l, w);
    for (x = TAILQ_FIRST(&l->q->waiters); x != w; x = next) {
        next = TAILQ_NEXT(x, link);
        x->tried = 1;
        x->ttl_ms = count; /* a TRYAWAIT's TIMEOUT says it */
        if (x->once) {
            lock_answer_timeout(l->mgr, x->owner, x->hdr.call, count);
            lock_wait_end(x);
        }
    }
    if (w->once) {
        /* The core answers w TIMEOUT and ends it; latch_taken never runs
         * for it: the waiters it looked for wait here as a taken look's
         * would (or look again, if a message came meanwhile). */
        if (w->woken) {
            for (x = TAILQ_FIRST(&l->q->waiters); x != w; x = TAILQ_NEXT(x, link)) x->parked = 0;
        } else if (TAILQ_FIRST(&l->q->waiters) != w) {
            if (!l->q->subscribed) lock_watch(l, BACKEND_LATCH, 0);
            lock_retry_at(l, -1);
        }
    }
}

/* w (an AWAIT, a TRYAWAIT with a wait) and those before it wait for a
 * message, watched from now on; one that came while the look was in
 * flight means it may be stale: all of them look again. */
static void latch_taken(lock_t *l, wait_t *w, const backend_result_t *res) {
    (void)res;
    if (w->woken) {
        wait_t *x;
        TAILQ_FOREACH(x, &l->q->waiters, link) {
            x->parked = 0;
            if (x == w) break;
        }
    } else {
        if (!l->q->subscribed) {
            /* Its confirmation brings one more look: a zero reached
             * before the watch was in force is not missed. */
            lock_watch(l, BACKEND_LATCH, 0);
        }
        lock_retry_at(l, -1);
    }
    lock_kick(l); /* those who came meanwhile look themselves */
}

/* A look changes nothing in Redis: nothing to undo. */
static void latch_undo(lock_t *l, const wait_t *w, uint64_t owner) {
    (void)l;
    (void)w;
    (void)owner;
}

/* AWAIT, TRYAWAIT: a wait, whatever the connection holds. */
static void latch_await(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    (void)l;
    lock_start_wait(m, o, o->call_now, req->verb, LOCK_MODE_LATCH, req->name, req->len,
                    req->wait_ms, 0, 0);
}

/* LATCHSET's 1 or 0, COUNTDOWN's count left, LATCHCOUNT's count; ERR
 * KIND when the name is another kind in Redis. */
static void latch_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    (void)h;
    if (op->bop.type == BACKEND_RELEASE && res->outcome != BACKEND_WRONG_KIND && res->fence == 0) {
        /* Zero now (or there was no latch): waiters here need not wait
         * for the message. */
        lock_t *l = lock_find(op->mgr, op->name, op->len);
        if (l != NULL && l->q != NULL) {
            lock_unpark(l);
            lock_kick(l);
        }
    }
    if (o == NULL) return;
    if (res->outcome == BACKEND_WRONG_KIND) {
        lock_answer_kind(op->mgr, o, op->hdr.call, LOCK_WHY_HELD_AS,
                         lock_mode_of_backend(res->held), op->name, op->len);
        return;
    }
    lock_answer_value(o, op->hdr.call,
                      op->bop.type == BACKEND_INIT ? res->holds : (long long)res->fence);
}

/* LATCHSET, COUNTDOWN, LATCHCOUNT. */
static void latch_request(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    backend_op_type_t type;
    if (req->verb != LOCK_VERB_OWN) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    switch (req->op) {
    case LATCH_OP_SET:
        if (req->count < 1 || req->count > LATCH_COUNT_MAX) {
            lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
            return;
        }
        type = BACKEND_INIT;
        break;
    case LATCH_OP_COUNTDOWN: type = BACKEND_RELEASE; break;
    case LATCH_OP_COUNT: type = BACKEND_STATUS; break;
    default:
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    if (!backend_available(m->backend, req->name, req->len)) {
        lock_answer_unavailable(m, o, o->call_now, req->name, req->len);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, l, req, type, LOCK_MODE_LATCH, latch_done);
    if (op == NULL) return;
    op->bop.count = req->count;
    op->bop.answer = op->answer; /* COUNTDOWN's and LATCHCOUNT's value reply */
    backend_submit(m->backend, &op->bop);
}

/* Its protocol words (session.c makes its commands of them). AWAIT and
 * TRYAWAIT wait, CANCEL withdraws them, and they take no turn on the
 * name: a tagged COUNTDOWN of the waiting connection's own goes by them
 * (and may release them). LATCHSET and COUNTDOWN take turns as a lock's
 * requests do. */
static const lock_word_t latch_words[] = {
    {"LATCHSET", LOCK_VERB_OWN, LOCK_MODE_LATCH, LATCH_OP_SET, LOCK_WORD_TURNS},
    {"COUNTDOWN", LOCK_VERB_OWN, LOCK_MODE_LATCH, LATCH_OP_COUNTDOWN, LOCK_WORD_TURNS},
    {"AWAIT", LOCK_VERB_LOCK, LOCK_MODE_LATCH, 0, LOCK_WORD_WAITS},
    {"TRYAWAIT", LOCK_VERB_TRYLOCK, LOCK_MODE_LATCH, 0, LOCK_WORD_WAITS | LOCK_WORD_TRY},
    {"LATCHCOUNT", LOCK_VERB_OWN, LOCK_MODE_LATCH, LATCH_OP_COUNT, 0},
    {.word = NULL},
};

const lock_kind_t lock_kind_latch = {
    .name = "latch",
    .status = LOCK_STATUS_NONE,
    .holds_nothing = 1,
    .words = latch_words,
    .text = {"a count-down latch (LATCHSET, COUNTDOWN, AWAIT, LATCHCOUNT)",
             "a count-down latch: nothing holds it", "count-down latches"},
    .cap = BACKEND_CAP_ONE_COPY,
    .watch = BACKEND_LATCH,
    .blocked = latch_blocked,
    .kick = latch_kick,
    .granted = latch_granted,
    .refused = latch_refused,
    .taken = latch_taken,
    .undo = latch_undo,
    .acquire = latch_await,
    .request = latch_request,
};
