/* cluster_open() when memory runs out: each of its allocations fails in turn, and nothing leaks.
 * SPDX-License-Identifier: MIT
 *
 * No server: the seed is a closed port, and cluster_open() connects only
 * once the loop runs. The test links with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free (see the
 * Makefile): the daemon's objects linked into it allocate through the
 * wrappers below, which fail a chosen allocation and keep the blocks that
 * are live. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/backend/backend.h"
#include "daemon/util/timers.h"

/* ---- allocations, counted and failed on demand ----------------------------- */

/* The names are the linker's (--wrap), hence the reserved-looking prefix.
 * zalloc() (util.h) is malloc and memset: it counts as a malloc. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void __wrap_free(void *p);

#define LIVE_MAX 4096

static int counting;           /* keep the blocks allocated from now on */
static int fail_at;            /* 0: off; n: the n-th allocation from now fails */
static int failures;           /* failures made */
static void *live[LIVE_MAX];   /* the blocks allocated here and not freed */
static size_t nlive;

/* Check, linked statically, allocates through here too: its blocks are
 * not counted, and nothing here may call ck_assert. */
static void live_add(void *p) {
    if (p == NULL || !counting) return;
    if (nlive == LIVE_MAX) abort();
    live[nlive++] = p;
}

static void live_del(void *p) {
    for (size_t i = nlive; i-- > 0;)
        if (live[i] == p) {
            live[i] = live[--nlive];
            return;
        }
    /* not ours: a block a library allocated */
}

static int fail_now(void) {
    if (fail_at > 0 && --fail_at == 0) {
        failures++;
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size) {
    if (fail_now()) return NULL;
    void *p = __real_malloc(size);
    live_add(p);
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    if (fail_now()) return NULL;
    void *p = __real_calloc(n, size);
    live_add(p);
    return p;
}

void *__wrap_realloc(void *p, size_t size) {
    if (fail_now()) return NULL;
    void *q = __real_realloc(p, size);
    if (q != NULL) {
        live_del(p);
        live_add(q);
    }
    return q;
}

void __wrap_free(void *p) {
    live_del(p);
    __real_free(p);
}

/* ---- the test -------------------------------------------------------------- */

/* cluster_open() answered "out of memory" and leaked: when the hash table
 * of names could not be made (the 3rd allocation), that of watches; when
 * the map connection could not be made (the 4th), that of names. */
START_TEST(cluster_open_leaked_its_hash_tables_when_memory_ran_out) {
    static conf_t conf; /* large: not on the stack */
    conf_defaults(&conf);
    conf.cluster_count = 1;
    snprintf(conf.cluster[0].host, sizeof(conf.cluster[0].host), "127.0.0.1");
    conf.cluster[0].port = 1;

    int opened = 0;
    char leaks[256] = "";       /* "n (k blocks)" of each allocation whose failure leaked */
    size_t k = 0;
    for (int n = 1; n < 1000; n++) {
        uv_loop_t loop;
        char err[BACKEND_ERR_LEN] = "";
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        timers_t *timers = timers_new(&loop);
        ck_assert_ptr_nonnull(timers);
        backend_env_t env = {
            .loop = &loop,
            .timers = timers,
            .conf = &conf,
            .uuid = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            .client_name = "dlockd:test:1",
            .tls = NULL,
        };
        size_t before = nlive;
        failures = 0;
        counting = 1;
        fail_at = n;
        backend_t *b = cluster_open(&env, err, sizeof(err));
        int reached = fail_at == 0; /* the n-th allocation came, and failed */
        fail_at = 0;
        if (b == NULL) {
            ck_assert_int_eq(failures, 1);
            ck_assert_str_eq(err, "out of memory");
            if (nlive != before && k < sizeof(leaks))
                k += (size_t)snprintf(leaks + k, sizeof(leaks) - k, " %d (%zu blocks)", n,
                                      nlive - before);
            nlive = before; /* counted once */
        } else {
            opened++;
            b->type->close(b);
        }
        timers_free(timers);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        counting = 0;
        if (b != NULL)
            ck_assert_msg(nlive == before, "allocation %d failed: %zu blocks left after close",
                          n, nlive - before);
        if (!reached) {
            ck_assert_ptr_nonnull(b); /* every allocation went through: it opened */
            ck_assert_int_ge(n, 4);   /* cl, two hash tables, the map connection */
            ck_assert_msg(k == 0, "cluster_open failed \"out of memory\" and leaked when "
                          "allocation n failed, n =%s", leaks);
            return;
        }
    }
    ck_abort_msg("cluster_open still allocating after 1000 allocations (%d opened)", opened);
}
END_TEST

static Suite *cluster_open_suite(void) {
    Suite *s = suite_create("cluster_open");
    TCase *tc = tcase_create("cluster_open");
    tcase_add_test(tc, cluster_open_leaked_its_hash_tables_when_memory_ran_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(cluster_open_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
