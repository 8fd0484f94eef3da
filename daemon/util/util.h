/* Tiny helpers shared by the daemon's modules.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_UTIL_H
#define DLOCK_UTIL_H

#include <stddef.h>

/* The struct that embeds member, from a pointer to that member. */
#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
