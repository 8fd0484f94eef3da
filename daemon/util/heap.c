/* Intrusive binary min-heap ordered by (when, seq): linked nodes, no allocation.
 * SPDX-License-Identifier: MIT */
#include "heap.h"

void heap_init(heap_t *h) {
    h->root = NULL;
    h->len = 0;
    h->seq = 0;
}

static void unlink_node(heap_node_t *n) {
    n->parent = n->left = n->right = NULL;
    n->queued = false;
}

/* Marks a subtree out of the heap. The tree is complete, so the recursion
 * is at most one level per bit of len deep. */
static void forget(heap_node_t *n) {
    if (n == NULL) return;
    heap_node_t *left = n->left, *right = n->right;
    unlink_node(n);
    forget(left);
    forget(right);
}

void heap_clear(heap_t *h) {
    forget(h->root);
    h->root = NULL;
    h->len = 0;
}

static bool less(const heap_node_t *a, const heap_node_t *b) {
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

/* The node at position pos, 1 <= pos <= len: below the root, each bit of
 * pos after the leading one says left (0) or right (1). */
static heap_node_t *node_at(const heap_t *h, size_t pos) {
    int depth = 0;
    for (size_t p = pos; p > 1; p >>= 1) depth++;
    heap_node_t *n = h->root;
    while (depth-- > 0) n = (pos >> depth) & 1 ? n->right : n->left;
    return n;
}

/* Makes the link that pointed to old point to n (the root, or a child link
 * of old's parent). */
static void replace_link(heap_t *h, const heap_node_t *old, heap_node_t *n) {
    heap_node_t *p = old->parent;
    if (p == NULL) h->root = n;
    else if (p->left == old) p->left = n;
    else p->right = n;
}

/* Swaps c with its parent: c goes up one level, every link around both
 * stays right. */
static void swap_with_parent(heap_t *h, heap_node_t *c) {
    heap_node_t *p = c->parent;
    heap_node_t *c_left = c->left, *c_right = c->right;
    heap_node_t *sibling;

    replace_link(h, p, c);
    c->parent = p->parent;
    if (p->left == c) {
        sibling = p->right;
        c->left = p;
        c->right = sibling;
    } else {
        sibling = p->left;
        c->left = sibling;
        c->right = p;
    }
    if (sibling != NULL) sibling->parent = c;
    p->parent = c;
    p->left = c_left;
    p->right = c_right;
    if (c_left != NULL) c_left->parent = p;
    if (c_right != NULL) c_right->parent = p;
}

static void sift_up(heap_t *h, heap_node_t *n) {
    while (n->parent != NULL && less(n, n->parent)) swap_with_parent(h, n);
}

static void sift_down(heap_t *h, heap_node_t *n) {
    for (;;) {
        heap_node_t *c = n->left;
        if (c == NULL) return;  /* complete: no left child, no right one */
        if (n->right != NULL && less(n->right, c)) c = n->right;
        if (!less(c, n)) return;
        swap_with_parent(h, c);
    }
}

void heap_push(heap_t *h, heap_node_t *n) {
    heap_remove(h, n);
    n->seq = h->seq++;
    n->queued = true;
    h->len++;
    if (h->len == 1) {
        h->root = n;
        return;
    }
    heap_node_t *p = node_at(h, h->len / 2);
    if (h->len & 1) p->right = n;
    else p->left = n;
    n->parent = p;
    sift_up(h, n);
}

void heap_remove(heap_t *h, heap_node_t *n) {
    if (!n->queued) return;
    /* Detach the last node; unless it is n, it takes n's place. */
    heap_node_t *last = node_at(h, h->len);
    replace_link(h, last, NULL);
    h->len--;
    if (last != n) {
        replace_link(h, n, last);
        last->parent = n->parent;
        last->left = n->left;
        last->right = n->right;
        if (last->left != NULL) last->left->parent = last;
        if (last->right != NULL) last->right->parent = last;
        /* At most one of these moves it. */
        sift_down(h, last);
        sift_up(h, last);
    }
    unlink_node(n);
}

heap_node_t *heap_min(const heap_t *h) {
    return h->root;
}

heap_node_t *heap_pop(heap_t *h) {
    heap_node_t *n = h->root;
    if (n != NULL) heap_remove(h, n);
    return n;
}

bool heap_queued(const heap_node_t *n) {
    return n->queued;
}
