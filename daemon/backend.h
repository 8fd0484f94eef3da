/* The Redis backend: connections, Lua scripts, pub/sub and timeouts.
 * SPDX-License-Identifier: MIT
 *
 * Redis appears nowhere else in the daemon. The lock manager speaks in lock
 * operations (acquire, release, renew, status, force, subscribe); this
 * module turns them into EVALSHA calls on a standalone Redis. Sentinel,
 * Cluster (keys already carry {hash tags}) or a Redlock quorum would be
 * other implementations of the same functions.
 *
 * Every operation's callback fires exactly once: with Redis's answer, or
 * with an error when Redis is down, fails, or does not answer within
 * command_timeout_ms. */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/util/timers.h"

/* Most locks renewed by one script call. */
#define BACKEND_RENEW_BATCH 500
/* Most acquires and releases sent in one script call. Operations asked for
 * during one loop iteration go together, before the loop polls again. */
#define BACKEND_BATCH_MAX 128
/* Reconnect backoff: doubles from MIN up to MAX. */
#define BACKEND_BACKOFF_MIN_MS 50
#define BACKEND_BACKOFF_MAX_MS 1000
/* How long a forced-unlock marker outlives the lock it removed. */
#define BACKEND_FORCED_MARK_MS 60000
#define BACKEND_ERR_LEN 256

typedef struct backend_s backend_t;

typedef enum {
    BACKEND_OK = 0,
    BACKEND_DOWN,      /* not connected, the connection broke, or no answer within
                          command_timeout_ms (the connection is dropped then) */
    BACKEND_FAILED     /* Redis answered with an error (message in error) */
} backend_status_t;

typedef enum {
    BACKEND_GRANTED = 0,  /* a new grant: fence is set */
    BACKEND_REENTERED,    /* the owner already held it: holds is set */
    BACKEND_TAKEN         /* someone else holds it: ttl_ms is set */
} backend_outcome_t;

typedef enum {
    BACKEND_RENEWED = 1,  /* renew: still ours, lease reset */
    BACKEND_GONE = 0,     /* renew: our field is gone (expired) */
    BACKEND_FORCED = 2    /* renew: removed by FORCEUNLOCK */
} backend_renewal_t;

typedef struct backend_result_s {
    backend_status_t status;
    const char *error;         /* text when status != BACKEND_OK */
    backend_outcome_t outcome; /* acquire */
    uint64_t fence;            /* acquire: BACKEND_GRANTED */
    long long holds;           /* acquire: REENTERED; release: holds left or -1
                                  if not held; status: this owner's holds */
    long long ttl_ms;          /* acquire: TAKEN; status: -2 free, -1 no expiry */
    long long removed;         /* force: 1 or 0 */
    long long receivers;       /* release: subscribers the release message reached */
    const uint8_t *renewed;    /* renew: one backend_renewal_t per item */
    size_t count;              /* renew: items */
} backend_result_t;

typedef void (*backend_cb)(void *data, const backend_result_t *res);

typedef enum {
    BACKEND_SUBSCRIBED = 0,    /* the subscription is in force */
    BACKEND_MESSAGE            /* a release was published */
} backend_event_t;

typedef void (*backend_sub_cb)(void *data, backend_event_t ev);
typedef void (*backend_state_cb)(void *data, int up);

/* One lock to renew. */
typedef struct backend_item_s {
    const char *name;
    size_t len;
    uint64_t owner;
} backend_item_t;

backend_t *backend_new(uv_loop_t *loop, const conf_t *conf, timers_t *timers);
/* Closes the connections: pending callbacks fire with BACKEND_DOWN. */
void backend_free(backend_t *b);

/* state_cb is called whenever the command connection goes up or down. */
void backend_on_state(backend_t *b, backend_state_cb cb, void *data);
int backend_up(const backend_t *b);
/* This daemon's owner-field prefix: a UUID made at start. */
const char *backend_uuid(const backend_t *b);
/* Why Redis is not connected, with Redis's own message when it gave one
 * (e.g. WRONGPASS); a static buffer, valid until the next call. */
const char *backend_down_reason(backend_t *b);


void backend_acquire(backend_t *b, const char *name, size_t len, uint64_t owner,
                     uint32_t lease_ms, backend_cb cb, void *data);
/* all = 0: drop one hold, never delete; all = 1: delete and publish. */
void backend_release(backend_t *b, const char *name, size_t len, uint64_t owner,
                     int all, backend_cb cb, void *data);
/* items stays the caller's and must live until cb. */
void backend_renew(backend_t *b, const backend_item_t *items, size_t count,
                   uint32_t lease_ms, backend_cb cb, void *data);
void backend_status(backend_t *b, const char *name, size_t len, uint64_t owner,
                    backend_cb cb, void *data);
void backend_force(backend_t *b, const char *name, size_t len, backend_cb cb,
                   void *data);

/* One subscription per name; cb gets BACKEND_SUBSCRIBED each time the
 * subscription takes effect (also after a reconnect) and BACKEND_MESSAGE
 * for each release. After unsubscribe, cb is not called again. */
void backend_subscribe(backend_t *b, const char *name, size_t len,
                       backend_sub_cb cb, void *data);
void backend_unsubscribe(backend_t *b, const char *name, size_t len);

#endif
