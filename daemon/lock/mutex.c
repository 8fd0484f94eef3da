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
 * locks, RLocks too, read the same way (fair.c). */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/kind.h"
#include "daemon/util/util.h"

/* The read of what a refused waiter's name is. */
typedef struct kind_read_s {
    backend_op_t bop;
    wait_t *w;                 /* NULL once w stopped waiting */
    char answer[BACKEND_ANSWER_MAX + 1];
    size_t len;
    char name[];
} kind_read_t;

static void on_kind_read(backend_op_t *bop) {
    kind_read_t *kr = container_of(bop, kind_read_t, bop);
    wait_t *w = kr->w;
    const backend_result_t *res = &bop->res;
    int election = res->status == BACKEND_OK && res->outcome != BACKEND_WRONG_KIND &&
                   res->fence != 0;
    free(kr);
    if (w == NULL) return;
    w->kind_read = NULL;
    if (!election || w->owner == NULL || w->lock->mgr->stopping) return;
    lock_t *l = w->lock;
    /* As a CANCEL: an acquire in flight is undone right behind it. */
    lock_wait_withdraw(w);
    lock_answer_kind(l->mgr, w->owner, LOCK_WHY_HELD_AS, LOCK_MODE_ELECT, l->name, l->len);
    lock_wait_end(w);
    lock_maybe_free(l);
}

/* The first refusal of a wait that waits on: read what the name is. */
void lock_refused_read_kind(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    unsigned cap = lock_kind_of(LOCK_MODE_ELECT)->cap;
    if (w->tried || w->once || w->kind_read != NULL || (cap && !(m->backend->caps & cap)))
        return;
    kind_read_t *kr = zalloc(sizeof(*kr) + l->len + 1);
    if (kr == NULL) return; /* it waits, as before */
    kr->w = w;
    memcpy(kr->name, l->name, l->len);
    kr->len = l->len;
    lock_op_init(&kr->bop, BACKEND_LEADER, LOCK_MODE_ELECT, kr->name, kr->len, 0, on_kind_read);
    kr->bop.answer = kr->answer;
    w->kind_read = kr;
    backend_submit(m->backend, &kr->bop);
}

void lock_leave_read_kind(lock_t *l, wait_t *w) {
    kind_read_t *kr = w->kind_read;
    (void)l;
    if (kr == NULL) return;
    kr->w = NULL;
    w->kind_read = NULL;
}

static void mutex_leave(lock_t *l, wait_t *w, int was_head) {
    (void)was_head;
    lock_leave_read_kind(l, w);
}

const lock_kind_t lock_kind_mutex = {
    .name = "mutex",
    .watch = BACKEND_MUTEX,
    .status = LOCK_STATUS_EXCLUSIVE,
    .kick = lock_kick_head,
    .refused = lock_refused_read_kind,
    .leave = mutex_leave,
};
