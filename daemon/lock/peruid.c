/* Per-uid accounts: the holds and waiters of all of one uid's owners, for
 * max_locks_per_uid and max_waiters_per_uid.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "internal.h"

struct lock_acct_s {
    hmap_node_t node;
    uid_t uid;                 /* the key's bytes */
    lockmgr_t *mgr;
    uint32_t owners;           /* owners of this uid; the account goes with the last */
    uint64_t held;             /* their holds */
    uint64_t waiting;          /* their queued requests */
};

int lock_acct_join(lockmgr_t *m, lock_owner_t *o) {
    lock_acct_t *a = (lock_acct_t *)hmap_get(&m->accts, (const char *)&o->uid, sizeof(o->uid));
    if (a == NULL) {
        if ((a = calloc(1, sizeof(*a))) == NULL) return -1;
        a->uid = o->uid;
        a->mgr = m;
        a->node.key = (const char *)&a->uid;
        a->node.len = sizeof(a->uid);
        hmap_put(&m->accts, &a->node);
    }
    a->owners++;
    o->acct = a;
    return 0;
}

void lock_acct_leave(lock_owner_t *o) {
    lock_acct_t *a = o->acct;
    o->acct = NULL;
    if (a == NULL || --a->owners > 0) return;
    hmap_del(&a->mgr->accts, &a->node);
    free(a);
}

void lock_acct_free_all(lockmgr_t *m) {
    size_t i = 0;
    hmap_node_t *n = hmap_next(&m->accts, &i, NULL);
    while (n != NULL) {
        hmap_node_t *next = hmap_next(&m->accts, &i, n);
        hmap_del(&m->accts, n);
        free(n);
        n = next;
    }
    hmap_free(&m->accts);
}

void lock_acct_held(lock_owner_t *o, int delta) {
    if (o->acct != NULL) o->acct->held += (uint64_t)(int64_t)delta;
}

void lock_acct_waiting(lock_owner_t *o, int delta) {
    if (o->acct != NULL) o->acct->waiting += (uint64_t)(int64_t)delta;
}

lock_why_t lock_acct_new_holds(const lockmgr_t *m, const lock_owner_t *o, size_t n) {
    if (o->acct != NULL && o->acct->held + n > m->conf->max_locks_per_uid)
        return LOCK_WHY_MAX_LOCKS_UID;
    return LOCK_WHY_NONE;
}

lock_why_t lock_acct_room(const lockmgr_t *m, const lock_owner_t *o, size_t n) {
    if (o->held_count + n > m->conf->max_locks_per_client) return LOCK_WHY_MAX_LOCKS;
    return lock_acct_new_holds(m, o, n);
}

lock_why_t lock_acct_new_wait(const lockmgr_t *m, const lock_owner_t *o) {
    if (o->acct != NULL && o->acct->waiting >= m->conf->max_waiters_per_uid)
        return LOCK_WHY_MAX_WAITERS_UID;
    return LOCK_WHY_NONE;
}
