/* Steps the election tests share: fences, ELECT, and !LEADER events read in order.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TESTS_ELECT_STEPS_H
#define DLOCK_TESTS_ELECT_STEPS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"

/* "OK <fence>": the fence. */
static inline unsigned long long ok_fence(const char *line, const char *what) {
    unsigned long long f = 0;
    char tail;
    ck_assert_msg(line != NULL, "%s: no reply", what);
    ck_assert_msg(sscanf(line, "OK %llu%c", &f, &tail) == 1 && f > 0, "%s: %s", what, line);
    return f;
}

static inline unsigned long long elect(h_conn_t *c, const char *name, const char *value) {
    h_send(c, "ELECT %s %s\n", name, value);
    return ok_fence(h_reply(c, H_WAIT_MS, H_EVENTS_FAIL), "ELECT");
}

/* The next !LEADER <name> event on c: its fence, 0 for NONE; value into v. */
static inline unsigned long long leader_event(h_conn_t *c, const char *name, char *v, size_t vlen,
                                       int timeout_ms) {
    const char *line = h_recv(c, timeout_ms);
    char n[300], a[300];
    ck_assert_msg(line != NULL, "no !LEADER event for %s", name);
    int k = sscanf(line, "!LEADER %299s %299s %299s", n, a, v);
    ck_assert_msg(k >= 2 && strcmp(n, name) == 0, "not a !LEADER of %s: %s", name, line);
    if (strcmp(a, "NONE") == 0) return 0;
    ck_assert_msg(k == 3 && strlen(v) < vlen, "bad !LEADER: %s", line);
    return strtoull(a, NULL, 10);
}

/* Reads events of c until one names fence: the fences told rise, the same
 * one again only after a NONE. */
static inline void await_leader(h_conn_t *c, const char *name, unsigned long long fence,
                         const char *value, unsigned long long *last) {
    char v[300];
    int none = 0;
    for (;;) {
        unsigned long long f = leader_event(c, name, v, sizeof(v), H_WAIT_MS);
        if (f == 0) {
            none = 1;
            continue;
        }
        ck_assert_msg(f > *last || (f == *last && none), "fence %llu told after %llu%s", f,
                      *last, none ? " and NONE" : "");
        *last = f;
        none = 0;
        ck_assert_msg(f <= fence, "fence %llu told, waiting for %llu", f, fence);
        if (f == fence) {
            ck_assert_str_eq(v, value);
            return;
        }
    }
}

#endif
