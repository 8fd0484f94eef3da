/* Binary min-heap ordered by (when, seq), with O(log n) removal by index.
 * SPDX-License-Identifier: MIT */
#include "heap.h"

#include <stdlib.h>

void heap_init(heap_t *h) {
    h->nodes = NULL;
    h->len = h->cap = 0;
    h->seq = 0;
}

void heap_free(heap_t *h) {
    for (size_t i = 0; i < h->len; i++) h->nodes[i]->index = 0;
    free(h->nodes);
    heap_init(h);
}

static int less(const heap_node_t *a, const heap_node_t *b) {
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

static void place(heap_t *h, size_t i, heap_node_t *n) {
    h->nodes[i] = n;
    n->index = i + 1;
}

static void sift_up(heap_t *h, size_t i) {
    heap_node_t *n = h->nodes[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!less(n, h->nodes[parent])) break;
        place(h, i, h->nodes[parent]);
        i = parent;
    }
    place(h, i, n);
}

static void sift_down(heap_t *h, size_t i) {
    heap_node_t *n = h->nodes[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len) break;
        if (c + 1 < h->len && less(h->nodes[c + 1], h->nodes[c])) c++;
        if (!less(h->nodes[c], n)) break;
        place(h, i, h->nodes[c]);
        i = c;
    }
    place(h, i, n);
}

int heap_push(heap_t *h, heap_node_t *n) {
    if (n->index != 0) heap_remove(h, n);
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        heap_node_t **nn = realloc(h->nodes, cap * sizeof(*nn));
        if (nn == NULL) return -1;
        h->nodes = nn;
        h->cap = cap;
    }
    n->seq = h->seq++;
    place(h, h->len++, n);
    sift_up(h, h->len - 1);
    return 0;
}

void heap_remove(heap_t *h, heap_node_t *n) {
    if (n->index == 0) return;
    size_t i = n->index - 1;
    n->index = 0;
    h->len--;
    if (i == h->len) return;
    place(h, i, h->nodes[h->len]);
    if (i > 0 && less(h->nodes[i], h->nodes[(i - 1) / 2])) sift_up(h, i);
    else sift_down(h, i);
}

heap_node_t *heap_min(const heap_t *h) {
    return h->len ? h->nodes[0] : NULL;
}

heap_node_t *heap_pop(heap_t *h) {
    heap_node_t *n = heap_min(h);
    if (n != NULL) heap_remove(h, n);
    return n;
}
