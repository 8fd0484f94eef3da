/* Multi-name locks (multi.c): what the core calls for a wait of many names.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_LOCK_MULTI_H
#define DLOCK_LOCK_MULTI_H

#include "daemon/lock/internal.h"

/* The owner's multi-name wait (pending, PENDING_MULTI) is withdrawn: ERR
 * CANCELLED, and nothing of the set stays held. */
void multi_cancel(pending_t *pending);
/* Its owner is gone: it ends without an answer. */
void multi_orphan(pending_t *pending);

#endif
