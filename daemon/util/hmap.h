/* A small intrusive hash map keyed by byte strings (lock names, channels).
 * SPDX-License-Identifier: MIT
 *
 * Hand-made because neither libuv nor libc offers one (hsearch is global
 * and cannot delete). Entries embed an hmap_node_t; the map never
 * allocates or frees entries, only its bucket array. */
#ifndef DLOCK_HMAP_H
#define DLOCK_HMAP_H

#include <stddef.h>
#include <stdint.h>

#define HMAP_MIN_BUCKETS 16

typedef struct hmap_node_s {
    struct hmap_node_s *next;
    uint64_t hash;
    const char *key;   /* set by the caller before hmap_put; must outlive the entry */
    size_t len;
} hmap_node_t;

typedef struct hmap_s {
    hmap_node_t **buckets;
    size_t nbuckets;   /* a power of two */
    size_t count;
} hmap_t;

int hmap_init(hmap_t *m);                 /* 0, or -1 on no memory */
void hmap_free(hmap_t *m);                /* frees buckets, not entries */
hmap_node_t *hmap_get(const hmap_t *m, const char *key, size_t len);
/* Adds node; its key must not be in the map yet. */
void hmap_put(hmap_t *m, hmap_node_t *node);
void hmap_del(hmap_t *m, hmap_node_t *node);
/* Grows the buckets for n entries at once (a live restore's), rather than
 * doubling on the way; 0, or -1 on no memory (the map stays usable). */
int hmap_reserve(hmap_t *m, size_t n);
/* Iteration: start with i = 0 and node = NULL; returns NULL at the end.
 * To delete the current node, fetch the next one first. */
hmap_node_t *hmap_next(const hmap_t *m, size_t *i, hmap_node_t *node);
uint64_t hmap_hash(const char *key, size_t len);

#endif
