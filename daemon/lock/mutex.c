/* The plain lock: Redisson's RLock, one holder at a time, reentrant.
 * SPDX-License-Identifier: MIT
 *
 * A mutex is the core's defaults (kind.h): any local hold keeps a waiter
 * from trying, the head tries alone, a grant is a hold with Redis's
 * fence, and a refused waiter watches the name's channel until a release
 * or the holder's lease ends.
 *
 * An election's leader is a plain lock's holder in Redis (elect.lua), so
 * a LOCK of a name that another daemon's election leads is refused as
 * TAKEN. The first refusal of a wait (not a TRYLOCK of 0, which tries
 * once) therefore reads what the name is, with an election's LEADER read,
 * where the topology has elections; if it leads an election, the wait
 * ends with ERR KIND, as on the leader's own daemon. The read's answer
 * does nothing once the wait has ended (its leave hook forgets it). Fair
 * locks (RLocks too) and multi-name sets read the same way (fair.c,
 * multi.c). */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/kind.h"
#include "daemon/util/util.h"

/* A read of whether an election leads a name. */
struct election_read_s {
    backend_op_t bop;
    lock_election_cb cb;       /* NULL once forgotten */
    void *data;
    char answer[BACKEND_ANSWER_MAX + 1];
    char name[];
};

static void on_election_read(backend_op_t *bop) {
    election_read_t *r = container_of(bop, election_read_t, bop);
    const backend_result_t *res = &bop->res;
    int leads = res->status == BACKEND_OK && res->outcome != BACKEND_WRONG_KIND && res->fence != 0;
    lock_election_cb cb = r->cb;
    void *data = r->data;
    free(r);
    if (cb != NULL) cb(data, leads);
}

election_read_t *lock_read_election(lockmgr_t *m, const char *name, size_t len,
                                    lock_election_cb cb, void *data) {
    unsigned cap = lock_kind_of(LOCK_MODE_ELECT)->cap;
    if (cap && !(m->backend->caps & cap)) return NULL;
    election_read_t *r = zalloc(sizeof(*r) + len + 1);
    if (r == NULL) return NULL;
    r->cb = cb;
    r->data = data;
    memcpy(r->name, name, len);
    lock_op_init(&r->bop, BACKEND_LEADER, LOCK_MODE_ELECT, r->name, len, 0, on_election_read);
    r->bop.answer = r->answer;
    backend_submit(m->backend, &r->bop);
    return r;
}

void lock_read_forget(election_read_t *r) {
    r->cb = NULL;
}

static void on_wait_read(void *data, int leads) {
    wait_t *w = data;
    w->kind_read = NULL;
    if (!leads || w->owner == NULL || w->lock->mgr->stopping) return;
    lock_t *l = w->lock;
    /* As a CANCEL: an acquire in flight is undone right behind it. */
    lock_wait_withdraw(w);
    lock_answer_kind(l->mgr, w->owner, w->hdr.call, LOCK_WHY_HELD_AS, LOCK_MODE_ELECT, l->name,
                     l->len);
    lock_wait_end(w);
    lock_maybe_free(l);
}

void lock_refused_read_kind(lock_t *l, wait_t *w) {
    if (w->tried || w->once || w->kind_read != NULL) return;
    w->kind_read = lock_read_election(l->mgr, l->name, l->len, on_wait_read, w);
}

void lock_leave_read_kind(lock_t *l, wait_t *w) {
    (void)l;
    if (w->kind_read == NULL) return;
    lock_read_forget(w->kind_read);
    w->kind_read = NULL;
}

static void mutex_leave(lock_t *l, wait_t *w, int was_head) {
    (void)was_head;
    lock_leave_read_kind(l, w);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t mutex_words[] = {
    {"LOCK", LOCK_VERB_LOCK, LOCK_MODE_MUTEX, 0, LOCK_WORD_AS_LOCK},
    {"TRYLOCK", LOCK_VERB_TRYLOCK, LOCK_MODE_MUTEX, 0, LOCK_WORD_AS_TRYLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_mutex = {
    .name = "mutex",
    .words = mutex_words,
    .text = {"held as a plain lock (LOCK, UNLOCK)",
             "held as a plain lock: UNLOCK releases it", "plain locks"},
    .watch = BACKEND_MUTEX,
    .status = LOCK_STATUS_EXCLUSIVE,
    .kick = lock_kick_head,
    .refused = lock_refused_read_kind,
    .leave = mutex_leave,
};
