/* Unit tests of daemon/backend/keys: numbers, lock keys, Redisson's companion names, owner fields.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"

static void check_u64(uint64_t v) {
    char got[24], want[24];
    size_t n = keys_u64(got, v);
    got[n] = '\0';
    snprintf(want, sizeof(want), "%" PRIu64, v);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(n, strlen(want));
}

START_TEST(test_u64_edges) {
    uint64_t edges[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 65535,
                        3000, 4294967295u, 1000000000000000000ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) check_u64(edges[i]);
    /* Every power of ten and its neighbours. */
    for (uint64_t p = 1; p <= 10000000000000000000ull; p *= 10) {
        check_u64(p - 1);
        check_u64(p);
        check_u64(p + 1);
        if (p > UINT64_MAX / 10) break;
    }
}
END_TEST

START_TEST(test_u64_random) {
    srand(1);
    for (int i = 0; i < 100000; i++) {
        uint64_t v = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 11) ^ (uint64_t)rand();
        check_u64(v >> (i % 64));
    }
}
END_TEST

START_TEST(test_lock_key) {
    char out[KEYS_KEY_MAX];
    ck_assert_uint_eq(keys_lock(out, "dlock:", "orders", 6), 12);
    ck_assert_str_eq(out, "dlock:orders");
    ck_assert_uint_eq(keys_lock(out, "", "x", 1), 1);
    ck_assert_str_eq(out, "x");
}
END_TEST

START_TEST(test_companion_braces) {
    char out[KEYS_COMPANION_MAX];
    /* Redisson's prefixName: braces around the key, so that a lock and its
     * companions share one Cluster slot... */
    size_t n = keys_companion(out, KEYS_CHANNEL, "dlock:orders", 12);
    ck_assert_str_eq(out, "redisson_lock__channel:{dlock:orders}");
    ck_assert_uint_eq(n, strlen(out));
    keys_companion(out, KEYS_TOKEN, "dlock:orders", 12);
    ck_assert_str_eq(out, "redisson_lock_token:{dlock:orders}");
    /* ...unless the key already has a hash tag of its own. */
    keys_companion(out, KEYS_FORCED, "dlock:{tenant}:orders", 21);
    ck_assert_str_eq(out, "dlock_forced:dlock:{tenant}:orders");
}
END_TEST

START_TEST(test_owner_field) {
    char out[KEYS_FIELD_MAX];
    const char *uuid = "0c5e1f9a-6b1e-4c43-9b7c-3f2d1e0a9b8c";
    size_t n = keys_owner_field(out, uuid, 42);
    ck_assert_str_eq(out, "0c5e1f9a-6b1e-4c43-9b7c-3f2d1e0a9b8c:42");
    ck_assert_uint_eq(n, strlen(out));
    n = keys_owner_field(out, uuid, UINT64_MAX);
    ck_assert_uint_lt(n, KEYS_FIELD_MAX);
    ck_assert_str_eq(out + KEYS_UUID_LEN + 1, "18446744073709551615");
}
END_TEST

/* Redis's own vectors: the CRC16 check value of the cluster spec, and the
 * slots CLUSTER KEYSLOT gives (checked against redis-server 7.0). */
START_TEST(test_slots) {
    ck_assert_uint_eq(keys_crc16("123456789", 9), 0x31C3);
    ck_assert_uint_eq(keys_slot("foo", 3), 12182);
    ck_assert_uint_eq(keys_slot("bar", 3), 5061);
    ck_assert_uint_eq(keys_slot("", 0), 0);
    ck_assert_uint_eq(keys_slot("{user1000}.following", 20), 3443);
    ck_assert_uint_eq(keys_slot("foo{}{bar}", 10), 8363);
    ck_assert_uint_eq(keys_slot("foo{{bar}}zap", 13), 4015);
    ck_assert_uint_eq(keys_slot("dlock:orders", 12), 6696);
    ck_assert_uint_eq(keys_slot("redisson_lock__channel:{dlock:orders}", 37), 6696);
    /* hash tags: the first {...} that is not empty */
    ck_assert_uint_eq(keys_slot("{user1000}.following", 20), keys_slot("user1000", 8));
    ck_assert_uint_eq(keys_slot("{user1000}.followers", 20), keys_slot("user1000", 8));
    ck_assert_uint_eq(keys_slot("foo{}{bar}", 10), keys_slot("foo{}{bar}", 10));
    ck_assert_uint_ne(keys_slot("foo{}{bar}", 10), keys_slot("bar", 3)); /* {} is no tag */
    ck_assert_uint_eq(keys_slot("foo{{bar}}zap", 13), keys_slot("{bar", 4));
    ck_assert_uint_eq(keys_slot("foo{bar}{zap}", 13), keys_slot("bar", 3));
    ck_assert_uint_eq(keys_slot("a{b", 3), keys_slot("a{b", 3));
}
END_TEST

/* Whether all of a lock's companions are in its slot. */
static int companions_share_slot(const char *name) {
    static const char *const kinds[] = {KEYS_TOKEN, KEYS_CHANNEL, KEYS_FORCED};
    char key[KEYS_KEY_MAX], comp[KEYS_COMPANION_MAX];
    size_t klen = keys_lock(key, "dlock:", name, strlen(name));
    for (size_t k = 0; k < 3; k++) {
        size_t clen = keys_companion(comp, kinds[k], key, klen);
        if (keys_slot(comp, clen) != keys_slot(key, klen)) return 0;
    }
    return 1;
}

/* A lock's companions land in its slot, in both of Redisson's shapes: a
 * name without braces gets them added, one with a hash tag keeps it. A
 * name with a '{' but no tag (empty braces, no closing one) keeps its
 * braces as Redisson does and so does not, nor does one with a '}' and no
 * '{' (the added braces close early): under Cluster their scripts would be
 * CROSSSLOT. Pinned here so that the Cluster topology has to
 * decide about them (refuse such names there, or place them). */
START_TEST(test_companions_share_the_slot) {
    static const char *const good[] = {"orders", "a:b:c", "{tenant7}:orders", "x{y}z",
                                       "}{a}"};
    static const char *const tagless[] = {"{}odd", "weird}{", "a{b", "a}b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(companions_share_slot(good[i]), "%s: a companion is in another slot",
                      good[i]);
    for (size_t i = 0; i < sizeof(tagless) / sizeof(tagless[0]); i++)
        ck_assert_msg(!companions_share_slot(tagless[i]), "%s: now shares its slot", tagless[i]);
}
END_TEST

static Suite *keys_suite(void) {
    Suite *s = suite_create("keys");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, test_u64_edges);
    tcase_add_test(tc, test_u64_random);
    tcase_add_test(tc, test_lock_key);
    tcase_add_test(tc, test_companion_braces);
    tcase_add_test(tc, test_owner_field);
    tcase_add_test(tc, test_slots);
    tcase_add_test(tc, test_companions_share_the_slot);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(keys_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
