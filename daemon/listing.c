/* LIST for the sessions and the HTTP board: a backend listing plus what this daemon knows.
 * SPDX-License-Identifier: MIT */
#include "daemon/listing.h"

#include <stdlib.h>
#include <string.h>

struct listing_s {
    lockmgr_t *locks;
    listing_cb cb;
    list_keep_cb keep;
    void *data;
    int cancelled;
};

static int on_keep(void *data, const char *name, size_t len) {
    listing_t *l = data;
    if (l->cancelled) return 0;
    return l->keep == NULL || l->keep(l->data, name, len);
}

static void on_listed(void *data, const list_result_t *res) {
    listing_t *l = data;
    if (!l->cancelled) {
        list_result_t r = *res;
        if (r.status == BACKEND_OK)
            for (size_t i = 0; i < r.n; i++) lockmgr_list_fill(l->locks, &r.entries[i]);
        l->cb(l->data, &r);
    }
    free(l);
}

listing_t *listing_start(lockmgr_t *locks, const char *pattern, size_t plen, size_t limit,
                         list_keep_cb keep, listing_cb cb, void *data) {
    listing_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return NULL;
    *l = (listing_t){.locks = locks, .cb = cb, .keep = keep, .data = data};
    if (backend_list(lockmgr_backend(locks), pattern, plen, limit, on_keep, on_listed, l) ==
        NULL) {
        free(l);
        return NULL;
    }
    return l;
}

void listing_cancel(listing_t *l) {
    l->cancelled = 1;
}

void listing_ring_add(listing_ring_t *r, uint64_t at_ms, const char *name, size_t len,
                      const char *reason, long long pid, long long uid) {
    listing_lost_t *e = &r->ev[r->next];
    e->at_ms = at_ms;
    if (len >= sizeof(e->name)) len = sizeof(e->name) - 1;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->reason = reason;
    e->pid = pid;
    e->uid = uid;
    r->next = (r->next + 1) % LISTING_LOST_MAX;
    if (r->count < LISTING_LOST_MAX) r->count++;
}

const listing_lost_t *listing_ring_get(const listing_ring_t *r, size_t i) {
    if (i >= r->count) return NULL;
    return &r->ev[(r->next + LISTING_LOST_MAX - 1 - i) % LISTING_LOST_MAX];
}
