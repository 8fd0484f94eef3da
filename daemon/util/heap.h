/* A binary min-heap of deadlines: the one timer structure for every deadline.
 * SPDX-License-Identifier: MIT
 *
 * Pure bookkeeping; timers.c drives it from a single uv_timer. Nodes are
 * embedded in their owners; the heap only holds pointers. */
#ifndef DLOCK_HEAP_H
#define DLOCK_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct heap_node_s {
    uint64_t when;     /* deadline, in loop milliseconds */
    uint64_t seq;      /* insertion order: equal deadlines fire first-in first-out */
    size_t index;      /* position + 1 in the heap; 0 when not in it */
} heap_node_t;

typedef struct heap_s {
    heap_node_t **nodes;
    size_t len;
    size_t cap;
    uint64_t seq;
} heap_t;

void heap_init(heap_t *h);
void heap_free(heap_t *h);
int heap_push(heap_t *h, heap_node_t *n);      /* 0, or -1 on no memory */
void heap_remove(heap_t *h, heap_node_t *n);   /* no-op if not in the heap */
heap_node_t *heap_min(const heap_t *h);        /* NULL if empty */
heap_node_t *heap_pop(heap_t *h);              /* NULL if empty */

#endif
