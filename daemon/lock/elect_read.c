/* The election read: one LEADER read of a name that refused a plain, fair or multi-name lock.
 * SPDX-License-Identifier: MIT
 *
 * elect_read.h says why. The read's answer does nothing once the wait
 * has ended (its kind's leave hook forgets it). */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect_read.h"
#include "daemon/util/util.h"

/* A read of whether an election leads a name. */
struct election_read_s {
    backend_op_t bop;
    lock_election_cb cb;       /* NULL once forgotten */
    void *data;
    election_read_t **slot;    /* a waiter's pointer to it, emptied as it
                                  answers (lock_refused_read_kind), or NULL */
    char answer[BACKEND_ANSWER_MAX + 1];
    char name[];
};

static void on_election_read(backend_op_t *bop) {
    election_read_t *r = container_of(bop, election_read_t, bop);
    const backend_result_t *res = &bop->res;
    int leads = res->status == BACKEND_OK && res->outcome != BACKEND_WRONG_KIND && res->fence != 0;
    lock_election_cb cb = r->cb;
    void *data = r->data;
    if (cb != NULL && r->slot != NULL) *r->slot = NULL;
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
    r->slot = NULL;
}

static void on_wait_read(void *data, int leads) {
    wait_t *w = data;
    if (!leads || w->owner == NULL || w->lock->mgr->stopping) return;
    lock_t *l = w->lock;
    /* As a CANCEL: an acquire in flight is undone right behind it. */
    lock_wait_withdraw(w);
    lock_answer_kind(l->mgr, w->owner, w->hdr.call, LOCK_WHY_HELD_AS, LOCK_MODE_ELECT, l->name,
                     l->len);
    lock_wait_end(w);
    lock_maybe_free(l);
}

void lock_refused_read_kind(lock_t *l, wait_t *w, election_read_t **read) {
    if (w->tried || w->once || *read != NULL) return;
    *read = lock_read_election(l->mgr, l->name, l->len, on_wait_read, w);
    if (*read != NULL) (*read)->slot = read;
}

void lock_refused_read_leader(lock_t *l, wait_t *w, election_read_t **read) {
    if (!w->acquire.res.leader || w->once || *read != NULL) return;
    *read = lock_read_election(l->mgr, l->name, l->len, on_wait_read, w);
    if (*read != NULL) (*read)->slot = read;
}

void lock_leave_read_kind(election_read_t **read) {
    if (*read == NULL) return;
    lock_read_forget(*read);
    *read = NULL;
}
