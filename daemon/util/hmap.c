/* An intrusive chained hash map with power-of-two buckets and FNV-1a hashing.
 * SPDX-License-Identifier: MIT */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

uint64_t hmap_hash(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ull;
    }
    /* Mix the high bits down: buckets use the low bits. */
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

int hmap_init(hmap_t *m) {
    m->nbuckets = HMAP_MIN_BUCKETS;
    m->count = 0;
    m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
    return m->buckets ? 0 : -1;
}

void hmap_free(hmap_t *m) {
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

hmap_node_t *hmap_get(const hmap_t *m, const char *key, size_t len) {
    uint64_t h = hmap_hash(key, len);
    for (hmap_node_t *n = m->buckets[h & (m->nbuckets - 1)]; n; n = n->next)
        if (n->hash == h && n->len == len && memcmp(n->key, key, len) == 0) return n;
    return NULL;
}

/* Rehashes into nb buckets (a power of two). */
static int resize(hmap_t *m, size_t nb) {
    hmap_node_t **b = calloc(nb, sizeof(*b));
    if (b == NULL) return -1;
    for (size_t i = 0; i < m->nbuckets; i++) {
        hmap_node_t *n = m->buckets[i];
        while (n) {
            hmap_node_t *next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
    return 0;
}

static int grow(hmap_t *m) {
    return resize(m, m->nbuckets * 2);
}

int hmap_reserve(hmap_t *m, size_t n) {
    size_t nb = m->nbuckets;
    while (nb < n) nb *= 2;
    return nb == m->nbuckets ? 0 : resize(m, nb);
}

void hmap_put(hmap_t *m, hmap_node_t *node) {
    /* A failed grow only makes chains longer; the put itself cannot fail. */
    if (m->count >= m->nbuckets) (void)grow(m);
    node->hash = hmap_hash(node->key, node->len);
    hmap_node_t **b = &m->buckets[node->hash & (m->nbuckets - 1)];
    node->next = *b;
    *b = node;
    m->count++;
}

void hmap_del(hmap_t *m, hmap_node_t *node) {
    hmap_node_t **p = &m->buckets[node->hash & (m->nbuckets - 1)];
    while (*p && *p != node) p = &(*p)->next;
    if (*p) {
        *p = node->next;
        node->next = NULL;
        m->count--;
    }
}

hmap_node_t *hmap_next(const hmap_t *m, size_t *i, hmap_node_t *node) {
    if (node != NULL && node->next != NULL) return node->next;
    if (node != NULL) (*i)++;
    for (; *i < m->nbuckets; (*i)++)
        if (m->buckets[*i]) return m->buckets[*i];
    return NULL;
}
