/* Steps the multi-name lock tests share: an "OK f1 ... fn" grant, a reply's first words.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TESTS_MLOCK_STEPS_H
#define DLOCK_TESTS_MLOCK_STEPS_H

#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"

/* "OK f1 ... fn" into fences; 0 if the line is not that. */
static inline int parse_fences(const char *l, size_t n, unsigned long long *fences) {
    if (l == NULL || strncmp(l, "OK", 2) != 0) return 0;
    const char *p = l + 2;
    for (size_t i = 0; i < n; i++) {
        char *end;
        if (*p != ' ') return 0;
        fences[i] = strtoull(p + 1, &end, 10);
        if (end == p + 1) return 0;
        p = end;
    }
    return *p == '\0';
}

static inline void expect_granted(h_conn_t *c, size_t n, unsigned long long *fences, int ms,
                           const char *what) {
    const char *l = h_reply(c, ms, H_EVENTS_SKIP);
    ck_assert_msg(parse_fences(l, n, fences), "%s: got '%s', wanted OK and %zu fences", what,
                  l ? l : "-", n);
}

static inline void expect_prefix(h_conn_t *c, const char *request, const char *prefix) {
    h_send(c, "%s\n", request);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strncmp(l, prefix, strlen(prefix)) == 0,
                  "%s: got '%s', wanted '%s...'", request, l ? l : "-", prefix);
}

#endif
