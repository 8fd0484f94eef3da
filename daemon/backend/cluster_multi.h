/* Cluster multi-name locks across slots: one mlock.lua call per slot, in a fixed order, undone on refusal.
 * SPDX-License-Identifier: MIT
 *
 * A MULTI ACQUIRE whose names live in one slot goes to that slot's
 * primary as one script call, atomic as on standalone. Names in several
 * slots cannot be one script: the set is split into slot groups, taken
 * one group after the other in a fixed global order (slot, then name),
 * each group one mlock.lua call on its own primary. When a later group is
 * refused (or fails), the groups granted before it are undone (a new name
 * released, a reentry one hold less: exactly what this attempt took), and
 * the op's answer is the refusal, once the undo answered: the waiter then
 * waits holding nothing. Others may see part of such a set taken for the
 * moment of an attempt; the fixed order keeps two attempts from refusing
 * each other forever.
 *
 * Ops on one name run in Redis in the order they were submitted: a group
 * goes in the line of its first name, so before it goes, every other
 * name of it with ops still in the topology's hands (a release waiting
 * out a slot's move) gets a STATUS behind them, a barrier, and the group
 * goes once those answered. */
#ifndef DLOCK_CLUSTER_MULTI_H
#define DLOCK_CLUSTER_MULTI_H

#include <stddef.h>

#include "daemon/backend/backend.h"

/* What the topology tells: a name's slot, and whether ops of a name are
 * in its hands (queued or out). */
typedef struct cluster_multi_env_s {
    unsigned (*slot_of)(const backend_t *b, const char *name, size_t len);
    int (*busy)(const backend_t *b, const char *name, size_t len);
} cluster_multi_env_t;

/* Orders the n names (slot[i] is names[i]'s) by slot, then name (bytes,
 * then length): order[k] is the index of the k-th. Writes each slot
 * group's end (an index into order, exclusive) into ends and returns the
 * number of groups (1 .. n; 0 for n 0). Pure. */
size_t cluster_multi_plan(const unsigned *slot, const backend_name_t *names, size_t n,
                          size_t *order, size_t *ends);

/* 1 if op is a MULTI ACQUIRE this file must run: its names span more than
 * one slot, or ops of a name other than the first (which routes it, and
 * orders it behind that name's ops) are in the topology's hands. */
int cluster_multi_split(const backend_t *b, const cluster_multi_env_t *env,
                        const backend_op_t *op);

/* Runs op (cluster_multi_split said 1) as one sub-op per slot group,
 * submitted to b (each of one slot, whose names have nothing in b's hands
 * but the first: b takes it as an ordinary op), and
 * calls op's callback once, with GRANTED and every value, or with the
 * first refusal or failure (which: the index in op->names) after the
 * groups granted before it were undone. 0; -1 without memory, with
 * nothing done (the caller sends op as one call: Redis refuses it). */
int cluster_multi_submit(backend_t *b, const cluster_multi_env_t *env, backend_op_t *op);

#endif
