/* Steps the multi-name lock tests share: an "OK f1 ... fn" grant, a reply's first words,
 * two clients taking a set in opposite orders.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TESTS_MLOCK_STEPS_H
#define DLOCK_TESTS_MLOCK_STEPS_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Two forked clients, of daemons da and db (the same one, or two), lock
 * {a,b} and {b,a} rounds times each, checking in memory they share that
 * they never hold the set together; a missing grant, an overlap or a bad
 * MUNLOCK fails the test. The milliseconds it took. */
static inline long long opposite_orders(int da, int db, const char *a, const char *b,
                                        int rounds) {
    atomic_int *inside = mmap(NULL, sizeof(*inside), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(inside, MAP_FAILED);
    atomic_init(inside, 0);
    int d[2] = {da, db};
    pid_t kid[2];
    long long t0 = h_now_ms();
    for (int k = 0; k < 2; k++) {
        if ((kid[k] = fork()) == 0) {
            h_conn_t *c = h_connect_index(d[k]);
            for (int i = 0; i < rounds; i++) {
                unsigned long long f[2];
                h_send(c, "MLOCK 2 %s %s\n", k ? b : a, k ? a : b);
                if (!parse_fences(h_recv(c, H_WAIT_MS), 2, f)) _exit(10 + k);
                if (atomic_fetch_add(inside, 1) != 0) _exit(20 + k);
                atomic_fetch_sub(inside, 1);
                h_send(c, "MUNLOCK 2 %s %s\n", a, b);
                const char *l = h_recv(c, H_WAIT_MS);
                if (l == NULL || strcmp(l, "OK 0 0") != 0) _exit(30 + k);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st;
        ck_assert_int_eq(waitpid(kid[k], &st, 0), kid[k]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "client %d: exit %d (1x: no grant, 2x: overlap, 3x: bad MUNLOCK)", k,
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    munmap(inside, sizeof(*inside));
    return h_now_ms() - t0;
}

#endif
