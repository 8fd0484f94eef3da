/* The plain lock: Redisson's RLock, one holder at a time, reentrant.
 * SPDX-License-Identifier: MIT
 *
 * A mutex is the core's defaults (kind.h): any local hold keeps a waiter
 * from trying, the head tries alone, a grant is a hold with Redis's
 * fence, and a refused waiter watches the name's channel until a release
 * or the holder's lease ends. */
#include "daemon/lock/kind.h"

const lock_kind_t lock_kind_mutex = {
    .name = "mutex",
    .watch = BACKEND_MUTEX,
    .status = LOCK_STATUS_EXCLUSIVE,
    .kick = lock_kick_head,
};
