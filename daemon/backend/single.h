/* One-node topologies (standalone, Sentinel): their struct's head, and the table entries that only forward to the node.
 * SPDX-License-Identifier: MIT
 *
 * A topology of one node starts its struct with SINGLE_FIELDS, as libuv's
 * handles start with UV_HANDLE_FIELDS, and points its backend_type_t's
 * entries at these functions where it has nothing of its own to add. */
#ifndef DLOCK_SINGLE_H
#define DLOCK_SINGLE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/node.h"

#define SINGLE_FIELDS                                                                       \
    backend_t base;                                                                         \
    node_t *node;             /* the one node: every op and watch goes there */

typedef struct single_s {
    SINGLE_FIELDS
} single_t;

void single_submit(backend_t *b, backend_op_t *op);
void single_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                  uint64_t owner, backend_watch_cb cb, void *data);
void single_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                    uint64_t owner);
/* Any name: whether the node is up. */
int single_available(const backend_t *b, const char *name, size_t len);
/* The node's timeouts. */
void single_reconfigure(backend_t *b, const conf_t *conf);
/* The node, as the primary. */
void single_nodes(const backend_t *b, backend_node_cb cb, void *data);
/* LIST: the one node. */
size_t single_scan_nodes(const backend_t *b, struct node_s **out, size_t cap, unsigned *need);

#endif
