/* Access at run time: connections per uid, the rate-limited deny log, a peer's groups.
 * SPDX-License-Identifier: MIT
 *
 * The rules themselves are conf/access.h's (pure). Here is what sessions
 * keep while running: how many connections each uid has (for
 * max_clients_per_uid), which denials were logged when (at most one line
 * per uid and rule each ACCESS_LOG_EVERY_MS, then a count of the rest),
 * and the groups a peer is seen in. No libuv: the clock comes in as now_ms. */
#ifndef DLOCK_DAEMON_ACCESS_H
#define DLOCK_DAEMON_ACCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf/access.h"
#include "daemon/util/hmap.h"

#define ACCESS_LOG_EVERY_MS   60000 /* one deny line per uid and rule this often */
#define ACCESS_LOG_KEYS_MAX   4096  /* (uid, rule) pairs remembered; past it, old ones go */
#define ACCESS_STATUS_MAX     4096  /* bytes of /proc/<pid>/status read */
#define ACCESS_LOG_KEY_LIMIT  (-100) /* the deny log's rule key of max_clients_per_uid */

/* ---- connections per uid ------------------------------------------------ */

typedef struct access_users_s {
    hmap_t map;                /* uid -> its count */
} access_users_t;

int access_users_init(access_users_t *u);    /* 0, or -1 on no memory */
void access_users_free(access_users_t *u);
/* One more connection of uid, unless it has limit already: 0 joined, 1 at
 * the limit, -1 no memory. */
int access_users_join(access_users_t *u, uid_t uid, uint32_t limit);
void access_users_leave(access_users_t *u, uid_t uid);
uint32_t access_users_count(const access_users_t *u, uid_t uid);

/* ---- the deny log ------------------------------------------------------- */

typedef struct access_log_s {
    hmap_t map;                /* (uid, rule) -> when it was last said */
} access_log_t;

int access_log_init(access_log_t *l);
void access_log_free(access_log_t *l);
/* A denial of uid under rule (a key naming the rule: its line, or a
 * negative number for none or a built-in one) at now_ms: 1 if it is to be
 * logged now, with *suppressed set to the denials not logged since the
 * last line; 0 if it is only counted. */
int access_log_deny(access_log_t *l, uid_t uid, int rule, uint64_t now_ms,
                    uint64_t *suppressed);

/* ---- a peer ------------------------------------------------------------- */

/* Fills p with uid and gid and, from /proc/<pid>/status at connect, the
 * peer's other groups (only if that process still has uid as its real
 * uid). Returns the number of extra groups seen, -1 if none could be read. */
int access_peer_read(access_peer_t *p, pid_t pid, uid_t uid, gid_t gid);

#endif
