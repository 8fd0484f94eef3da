/* Free lists of objects of one size.
 * SPDX-License-Identifier: MIT
 *
 * The request path makes and drops a few small objects per request (a
 * lock, its queue, a waiter, a release, the reply objects of Redis's
 * answer). glibc's per-thread cache keeps only 7 freed chunks of a size,
 * and fifty connections drop more than that at once: the rest go through
 * malloc's slower bins. A pool keeps up to `keep` freed objects instead
 * and hands them out zeroed, as calloc does.
 *
 * An object of a pool may also be freed with free(), and pool_put() takes
 * any object malloc'd with at least the pool's size. Sanitized builds keep
 * nothing, so that ASan still sees every use after free. One thread. */
#ifndef DLOCK_POOL_H
#define DLOCK_POOL_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/util.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOL_KEEPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_KEEPS 0
#endif
#endif
#ifndef POOL_KEEPS
#define POOL_KEEPS 1
#endif

typedef struct pool_s {
    size_t size;   /* bytes of each object, at least a pointer's */
    size_t keep;   /* the most objects kept */
    size_t n;      /* objects kept now */
    void *first;   /* a kept object, whose first bytes point at the next */
} pool_t;

static inline void pool_init(pool_t *p, size_t size, size_t keep) {
    p->size = size < sizeof(void *) ? sizeof(void *) : size;
    p->keep = POOL_KEEPS ? keep : 0;
    p->n = 0;
    p->first = NULL;
}

/* A zeroed object of the pool's size; NULL on no memory. */
static inline void *pool_get(pool_t *p) {
    void *o = p->first;
    if (o == NULL) return zalloc(p->size);
    memcpy(&p->first, o, sizeof(void *));
    p->n--;
    return memset(o, 0, p->size);
}

static inline void pool_put(pool_t *p, void *o) {
    if (o == NULL) return;
    if (p->n >= p->keep) {
        free(o);
        return;
    }
    memcpy(o, &p->first, sizeof(void *));
    p->first = o;
    p->n++;
}

/* An object of n bytes: from the pool when it fits the pool's size, else
 * from malloc; pool_put_sized() with the same n gives it back to where it
 * came from. For objects with a name at their end. */
static inline void *pool_get_sized(pool_t *p, size_t n) {
    return n <= p->size ? pool_get(p) : zalloc(n);
}

static inline void pool_put_sized(pool_t *p, void *o, size_t n) {
    if (n <= p->size) pool_put(p, o);
    else free(o);
}

/* Frees what the pool keeps. */
static inline void pool_drain(pool_t *p) {
    while (p->first != NULL) {
        void *o = p->first;
        memcpy(&p->first, o, sizeof(void *));
        free(o);
    }
    p->n = 0;
}

#endif
