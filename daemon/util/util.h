/* Tiny helpers shared by the daemon's modules.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_UTIL_H
#define DLOCK_UTIL_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The struct that embeds member, from a pointer to that member. */
#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* calloc(1, n) for the request path's small objects: glibc's calloc
 * (before 2.41) skips the per-thread cache that malloc takes them from.
 * The empty asm hides p from GCC, which would make the pair a calloc. */
static inline void *zalloc(size_t n) {
    void *p = malloc(n);
    if (p == NULL) return NULL;
    __asm__("" : "+r"(p));
    return memset(p, 0, n);
}

#endif
