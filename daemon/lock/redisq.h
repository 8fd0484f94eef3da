/* A kind whose waiters queue in Redis (fair locks, elections): what they share, in redisq.c.
 * SPDX-License-Identifier: MIT
 *
 * Every local waiter of such a kind asks Redis as soon as it comes,
 * taking its place in the name's queue there (the kind's prepare hook
 * sets queue_ms), and then waits: the local head for a wake-up or its
 * retry turn, the others for their turn. Every renew_every_ms all of
 * them ask again, in their order (the keep timer, in the queue's kind
 * area: a kind using this leaves that area to it), which keeps their
 * places from ending (a place lasts lease_ms) and, should Redis have lost
 * the queue, puts them back in the same order. A waiter that stops
 * waiting leaves its place (lock_leave_queue, in its kind's leave hook).
 * Such a kind sets kick = lock_kick_all, taken = redisq_taken, requeued
 * (redisq_queued, or its own that calls it), released = redisq_released,
 * queue_end = redisq_queue_end and prepare_op = redisq_prepare_op, and
 * queues = 1. */
#ifndef DLOCK_LOCK_REDISQ_H
#define DLOCK_LOCK_REDISQ_H

#include "daemon/lock/kind.h"

/* Redis put w in its queue: its place is kept from now (the keep timer
 * runs while anyone waits). */
void redisq_queued(lock_t *l, wait_t *w);
/* Redis refused w, which waits on in its queue: the head waits for its
 * wake-up (trying again at once if one came meanwhile) or its holder's
 * lease, the others for their turn; w's kind's requeued hook runs. */
void redisq_taken(lock_t *l, wait_t *w, const backend_result_t *res);
/* A release here: the local head may be Redis's too, and asks right
 * behind it rather than waiting for the wake-up. */
void redisq_released(lock_t *l, hold_t *h);
/* A request's one call (a reentry that finds its hold gone takes a
 * place): the place's length, as a wait's. */
void redisq_prepare_op(lockmgr_t *m, backend_op_t *op);
/* The queue goes: the keep timer stops. */
void redisq_queue_end(lock_t *l);

#endif
