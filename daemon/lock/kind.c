/* The request modes: which kind each belongs to, and how Redis's scripts name it.
 * SPDX-License-Identifier: MIT */
#include "daemon/lock/kind.h"

/* Each kind's table, in its own file. */
extern const lock_kind_t lock_kind_mutex, lock_kind_rw, lock_kind_sem, lock_kind_fair,
    lock_kind_elect, lock_kind_multi;

const lock_mode_info_t lock_modes[LOCK_MODE_COUNT] = {
    [LOCK_MODE_MUTEX] = {.kind = &lock_kind_mutex, .backend = BACKEND_MUTEX,
                         .released_by = LOCK_MODE_MUTEX},
    [LOCK_MODE_READ] = {.kind = &lock_kind_rw, .backend = BACKEND_READ,
                        .released_by = LOCK_MODE_READ, .shared = 1},
    [LOCK_MODE_WRITE] = {.kind = &lock_kind_rw, .backend = BACKEND_WRITE,
                         .released_by = LOCK_MODE_WRITE},
    [LOCK_MODE_SEM] = {.kind = &lock_kind_sem, .backend = BACKEND_SEM,
                       .released_by = LOCK_MODE_SEM},
    [LOCK_MODE_FAIR] = {.kind = &lock_kind_fair, .backend = BACKEND_FAIR,
                        .released_by = LOCK_MODE_MUTEX},
    [LOCK_MODE_ELECT] = {.kind = &lock_kind_elect, .backend = BACKEND_ELECT,
                         .released_by = LOCK_MODE_ELECT},
    [LOCK_MODE_MULTI] = {.kind = &lock_kind_multi, .backend = BACKEND_MULTI,
                         .released_by = LOCK_MODE_MUTEX},
};

lock_mode_t lock_mode_of_backend(backend_mode_t bmode) {
    for (int m = 0; m < LOCK_MODE_COUNT; m++)
        if (lock_modes[m].backend == bmode) return (lock_mode_t)m;
    return LOCK_MODE_MUTEX;
}

lock_mode_t lock_kind_mode(const lock_kind_t *k) {
    for (int m = 0; m < LOCK_MODE_COUNT; m++)
        if (lock_modes[m].kind == k) return (lock_mode_t)m;
    return LOCK_MODE_MUTEX;
}
