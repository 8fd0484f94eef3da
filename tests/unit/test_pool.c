/* Unit tests of daemon/util/pool.h: zeroed objects, reuse, the keep limit,
 * sized objects, drain. Sanitized builds keep nothing: reuse is checked
 * only where the pool keeps.
 * SPDX-License-Identifier: MIT */
#include "daemon/util/pool.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void *next_or_data;
    char bytes[40];
} obj_t;

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0) return 0;
    return 1;
}

START_TEST(objects_come_zeroed_and_are_reused) {
    pool_t p;
    pool_init(&p, sizeof(obj_t), 4);
    obj_t *a = pool_get(&p);
    ck_assert_ptr_nonnull(a);
    ck_assert(all_zero(a, sizeof(*a)));
    memset(a, 0xab, sizeof(*a));
    pool_put(&p, a);
    ck_assert_uint_eq(p.n, POOL_KEEPS ? 1 : 0);
    obj_t *b = pool_get(&p);
    ck_assert(all_zero(b, sizeof(*b)));  /* zeroed again, link and all */
    if (POOL_KEEPS) ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(p.n, 0);
    pool_put(&p, b);
    pool_put(&p, NULL);                  /* nothing */
    pool_drain(&p);
    ck_assert_uint_eq(p.n, 0);
    ck_assert_ptr_null(p.first);
}
END_TEST

START_TEST(it_keeps_no_more_than_keep) {
    pool_t p;
    void *o[10];
    pool_init(&p, sizeof(obj_t), 4);
    for (int i = 0; i < 10; i++) ck_assert_ptr_nonnull(o[i] = pool_get(&p));
    for (int i = 0; i < 10; i++) pool_put(&p, o[i]); /* the other 6 are freed */
    ck_assert_uint_eq(p.n, POOL_KEEPS ? 4 : 0);
    for (int i = 0; i < 10; i++) o[i] = pool_get(&p);
    ck_assert_uint_eq(p.n, 0);
    for (int i = 0; i < 10; i++) free(o[i]); /* a pool's object may be freed */
    pool_drain(&p);
}
END_TEST

START_TEST(sized_objects_that_do_not_fit_bypass_the_pool) {
    pool_t p;
    pool_init(&p, 64, 4);
    char *small = pool_get_sized(&p, 10), *big = pool_get_sized(&p, 1000);
    ck_assert(all_zero(small, 64));
    ck_assert(all_zero(big, 1000));
    pool_put_sized(&p, big, 1000);       /* freed, not kept */
    ck_assert_uint_eq(p.n, 0);
    pool_put_sized(&p, small, 10);
    ck_assert_uint_eq(p.n, POOL_KEEPS ? 1 : 0);
    pool_drain(&p);
    /* a size below a pointer's still holds the link */
    pool_init(&p, 1, 4);
    ck_assert_uint_eq(p.size, sizeof(void *));
    pool_put(&p, pool_get(&p));
    pool_drain(&p);
}
END_TEST

START_TEST(zalloc_is_zeroed) {
    unsigned char *q = zalloc(333);
    ck_assert_ptr_nonnull(q);
    ck_assert(all_zero(q, 333));
    free(q);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, objects_come_zeroed_and_are_reused);
    tcase_add_test(tc, it_keeps_no_more_than_keep);
    tcase_add_test(tc, sized_objects_that_do_not_fit_bypass_the_pool);
    tcase_add_test(tc, zalloc_is_zeroed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
