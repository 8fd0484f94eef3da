/* An intrusive binary min-heap of deadlines: the one timer structure for every deadline.
 * SPDX-License-Identifier: MIT
 *
 * Pure bookkeeping; timers.c drives it from a single uv_timer. Nodes are
 * embedded in their owners and carry the tree's links themselves, so the
 * heap never allocates and no operation can fail. The tree is complete: its
 * nodes fill it level by level, left to right, and the bits of a position
 * (1 for the root, 2k and 2k+1 for the children of k) spell the way down to
 * it. libuv's timers use the same shape (src/heap-inl.h). No Debian library
 * offers an intrusive heap, hence this small one.
 *
 * A node is not in any heap when zeroed, and after heap_remove/heap_pop.
 * A node belongs to at most one heap at a time; its owner keeps it alive
 * while it is in one. */
#ifndef DLOCK_HEAP_H
#define DLOCK_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct heap_node_s heap_node_t;

struct heap_node_s {
    uint64_t when;         /* deadline, in loop milliseconds */
    uint64_t seq;          /* insertion order: equal deadlines fire first-in first-out */
    /* links, all NULL while out of the heap */
    heap_node_t *parent;
    heap_node_t *left;
    heap_node_t *right;
    bool queued;           /* in a heap */
};

typedef struct heap_s {
    heap_node_t *root;     /* the earliest (when, seq), or NULL */
    size_t len;            /* nodes in the heap */
    uint64_t seq;          /* next insertion number */
} heap_t;

void heap_init(heap_t *h);
/* Empties the heap: every node it held is marked out of it. O(len). */
void heap_clear(heap_t *h);
/* Inserts n by its when; if n is already in h it is moved (and queues behind
 * its equals, as if new). Never fails. O(log len). */
void heap_push(heap_t *h, heap_node_t *n);
/* Takes n out of h; a no-op if n is not in a heap. O(log len). */
void heap_remove(heap_t *h, heap_node_t *n);
heap_node_t *heap_min(const heap_t *h);        /* NULL if empty */
heap_node_t *heap_pop(heap_t *h);              /* NULL if empty */
bool heap_queued(const heap_node_t *n);        /* n is in a heap */

#endif
