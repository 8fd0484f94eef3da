/* The lock manager. Until the Redis backend exists, every lock request is
 * refused with ERR BACKEND.
 * SPDX-License-Identifier: MIT */
#include "lockmgr.h"

#include <stdlib.h>

struct lockmgr_s {
    uv_loop_t *loop;
    const conf_t *conf;
    lockmgr_stats_t stats;
};

lockmgr_t *lockmgr_new(uv_loop_t *loop, const conf_t *conf) {
    lockmgr_t *mgr = calloc(1, sizeof(*mgr));
    if (mgr == NULL) return NULL;
    mgr->loop = loop;
    mgr->conf = conf;
    return mgr;
}

void lockmgr_shutdown(lockmgr_t *mgr, lockmgr_done_cb done, void *data) {
    done(mgr, data);
}

void lockmgr_free(lockmgr_t *mgr) {
    free(mgr);
}

void lockmgr_request(lockmgr_t *mgr, lock_owner_t *owner, const proto_request_t *req) {
    char line[PROTO_REPLY_MAX];
    (void)req;
    mgr->stats.backend_errors++;
    int n = proto_reply_error(line, sizeof(line), PROTO_ERR_BACKEND, "not connected");
    owner->on_reply(owner, line, (size_t)n);
}

void lockmgr_owner_drop(lockmgr_t *mgr, lock_owner_t *owner) {
    (void)mgr;
    (void)owner;
}

void lockmgr_stats(const lockmgr_t *mgr, lockmgr_stats_t *out) {
    *out = mgr->stats;
}
