/* The request modes: which kind each belongs to.
 * SPDX-License-Identifier: MIT */
#include "daemon/lock/kind.h"

/* Each kind's table, in its own file. */
extern const lock_kind_t lock_kind_mutex, lock_kind_rw, lock_kind_sem, lock_kind_fair,
    lock_kind_elect, lock_kind_multi, lock_kind_latch;

const lock_mode_info_t lock_modes[LOCK_MODE_COUNT] = {
    [LOCK_MODE_MUTEX] = {.kind = &lock_kind_mutex, .released_by = LOCK_MODE_MUTEX},
    [LOCK_MODE_READ] = {.kind = &lock_kind_rw, .released_by = LOCK_MODE_READ, .shared = 1},
    [LOCK_MODE_WRITE] = {.kind = &lock_kind_rw, .released_by = LOCK_MODE_WRITE},
    [LOCK_MODE_SEM] = {.kind = &lock_kind_sem, .released_by = LOCK_MODE_SEM},
    [LOCK_MODE_FAIR] = {.kind = &lock_kind_fair, .released_by = LOCK_MODE_MUTEX},
    [LOCK_MODE_ELECT] = {.kind = &lock_kind_elect, .released_by = LOCK_MODE_ELECT},
    [LOCK_MODE_MULTI] = {.kind = &lock_kind_multi, .released_by = LOCK_MODE_MUTEX},
    [LOCK_MODE_LATCH] = {.kind = &lock_kind_latch, .released_by = LOCK_MODE_LATCH, .shared = 1},
};

/* Both enums are daemon/modes.h's list: a mode's number is its backend
 * mode's. */
_Static_assert((int)LOCK_MODE_COUNT == (int)BACKEND_MODE_COUNT, "one list of modes");

lock_mode_t lock_kind_mode(const lock_kind_t *k) {
    for (int m = 0; m < LOCK_MODE_COUNT; m++)
        if (lock_modes[m].kind == k) return (lock_mode_t)m;
    return LOCK_MODE_MUTEX;
}

const lock_word_t *lockmgr_word(size_t i) {
    for (int m = 0; m < LOCK_MODE_COUNT; m++) {
        const lock_kind_t *k = lock_modes[m].kind;
        if (lock_kind_mode(k) != (lock_mode_t)m || k->words == NULL) continue; /* a kind once */
        for (const lock_word_t *w = k->words; w->word != NULL; w++)
            if (i-- == 0) return w;
    }
    return NULL;
}

const lock_kind_text_t *lockmgr_mode_text(lock_mode_t mode) {
    return &lock_kind_of((unsigned)mode < LOCK_MODE_COUNT ? mode : LOCK_MODE_MUTEX)->text;
}

size_t lockmgr_kind_stats(const lockmgr_t *m, lock_stat_t *out, size_t cap) {
    size_t n = 0;
    for (int i = 0; i < LOCK_MODE_COUNT; i++) {
        const lock_kind_t *k = lock_modes[i].kind;
        if (lock_kind_mode(k) == (lock_mode_t)i && k->stats != NULL)
            n += k->stats(m, out + n, cap - n);
    }
    return n;
}
