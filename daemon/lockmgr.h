/* The lock manager: owners, grants, waiters and the watchdog, over a backend.
 * SPDX-License-Identifier: MIT
 *
 * A session hands each lock request to lockmgr_request() and gets exactly
 * one reply line back through its owner's on_reply, now or later. Events
 * (!LOST) come through on_event at any time. After lockmgr_owner_drop()
 * neither callback is called again for that owner. */
#ifndef DLOCK_LOCKMGR_H
#define DLOCK_LOCKMGR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "conf/conf.h"
#include "proto/proto.h"

typedef struct lockmgr_s lockmgr_t;
typedef struct lock_owner_s lock_owner_t;

typedef void (*lock_line_cb)(lock_owner_t *owner, const char *line, size_t len);
typedef void (*lockmgr_done_cb)(lockmgr_t *mgr, void *data);

struct lock_owner_s {
    /* set by the session */
    uint64_t id;              /* unique in this daemon's life */
    uid_t uid;                /* peer credentials */
    lock_line_cb on_reply;    /* the one reply to the request in flight */
    lock_line_cb on_event;    /* !LOST and other events */
    void *data;               /* the session's own */

    /* owned by the lock manager */
    void *held;               /* first held lock, NULL if none */
    size_t held_count;
    struct lockmgr_pending_s *pending; /* the request in flight, or NULL */
};

/* Watchdog: a lock is given up as lost (reason "backend") this long before
 * its lease could run out, counted from the last renewal Redis confirmed:
 * lease_ms / LOCKMGR_LOSS_MARGIN_DIV. */
#define LOCKMGR_LOSS_MARGIN_DIV 10
/* When a release of ours woke waiters of other daemons, the next hand-off
 * to a local waiter waits this long, so that they get their turn. */
#define LOCKMGR_YIELD_MS 2
/* A waiter retries this often when the holder's key has no expiry. */
#define LOCKMGR_NO_TTL_RETRY_MS 1000

typedef struct lockmgr_stats_s {
    uint64_t locks_held;      /* grants this daemon holds now */
    uint64_t waiters;         /* requests queued for a lock */
    int backend_up;           /* 1 while Redis answers */
    uint64_t grants;          /* new grants (fences issued) */
    uint64_t reentries;       /* reentrant grants */
    uint64_t releases;
    uint64_t timeouts;        /* TRYLOCKs that timed out */
    uint64_t lost;            /* !LOST events sent */
    uint64_t renewals;        /* locks renewed by the watchdog */
    uint64_t backend_errors;  /* requests answered ERR BACKEND */
} lockmgr_stats_t;

lockmgr_t *lockmgr_new(uv_loop_t *loop, const conf_t *conf);
/* FORCEUNLOCK is for owner->uid 0 and the uids conf_is_admin() accepts. */

/* Releases every lock still held, then calls done. After done, only
 * lockmgr_free() may be called. */
void lockmgr_shutdown(lockmgr_t *mgr, lockmgr_done_cb done, void *data);
void lockmgr_free(lockmgr_t *mgr);

/* Handles LOCK, TRYLOCK, UNLOCK, RENEW, STATUS and FORCEUNLOCK. Calls
 * owner->on_reply exactly once, possibly before returning. An owner has at
 * most one request in flight. */
void lockmgr_request(lockmgr_t *mgr, lock_owner_t *owner,
                     const proto_request_t *req);

/* The owner is gone: cancels its wait and releases all its locks. */
void lockmgr_owner_drop(lockmgr_t *mgr, lock_owner_t *owner);

void lockmgr_stats(const lockmgr_t *mgr, lockmgr_stats_t *out);

#endif
