/* Unit tests of LIST's pure parts: MATCH patterns, lock keys, registry entries, owner fields, quorum merging.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/list.h"

START_TEST(match_escapes_the_prefix) {
    char out[64];
    ck_assert_uint_eq(list_match(out, sizeof(out), "dlock:", "job*", 4), 10);
    ck_assert_str_eq(out, "dlock:job*");
    ck_assert_uint_gt(list_match(out, sizeof(out), "a*b?[c]\\:", "x", 1), 0);
    ck_assert_str_eq(out, "a\\*b\\?\\[c\\]\\\\:x");
    ck_assert_uint_eq(list_match(out, sizeof(out), "", "*", 1), 1);
    ck_assert_str_eq(out, "*");
    /* too long for out */
    ck_assert_uint_eq(list_match(out, 8, "dlock:", "job*", 4), 0);
    ck_assert_uint_eq(list_match(out, 4, "a*b*", "", 0), 0);
}
END_TEST

static int key_name(const char *key, const char *prefix, const char *want) {
    const char *name = NULL;
    size_t len = 0;
    int r = list_key_name(key, strlen(key), prefix, &name, &len);
    if (r && want != NULL) ck_assert_msg(len == strlen(want) && memcmp(name, want, len) == 0,
                                         "%s: name '%.*s', wanted '%s'", key, (int)len, name, want);
    return r;
}

START_TEST(key_name_keeps_locks_only) {
    ck_assert(key_name("dlock:job1", "dlock:", "job1"));
    ck_assert(key_name("dlock:a/b/c", "dlock:", "a/b/c"));
    ck_assert(!key_name("other:job1", "dlock:", NULL));
    ck_assert(!key_name("dlock:", "dlock:", NULL));           /* no name */
    ck_assert(!key_name("dlock:a b", "dlock:", NULL));        /* not a valid name */
    char big[300] = "dlock:";
    memset(big + 6, 'x', 256);
    big[262] = '\0';
    ck_assert(!key_name(big, "dlock:", NULL));                /* longer than a name */
    /* With an empty prefix, companion keys are not locks. */
    ck_assert(key_name("job1", "", "job1"));
    ck_assert(!key_name("redisson_lock_token:{job1}", "", NULL));
    ck_assert(!key_name("redisson_lock__channel:{job1}", "", NULL));
    ck_assert(!key_name("dlock_leader:{job1}", "", NULL));
    ck_assert(!key_name("dlock_elect_queue:{job1}", "", NULL));
    ck_assert(!key_name("{job1}:timeout", "", NULL));
    ck_assert(key_name("{job1}", "", "{job1}"));             /* braces alone: a name */
    /* Every companion kind the scripts' rows name (scripts_companion):
     * the list LIST once kept by hand. */
    static const char *const kinds[] = {
        "redisson_lock__channel", "redisson_rwlock", "redisson_sc", "redisson_lock_queue",
        "redisson_lock_timeout", "dlock_fair", "dlock_forced", "dlock_elect_timeout",
        "redisson_lock_token",
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        char k[64];
        snprintf(k, sizeof(k), "%s:{job1}", kinds[i]);
        ck_assert_msg(!key_name(k, "", NULL), "%s is listed as a lock", k);
    }
    ck_assert(key_name("redisson_lockish:{job1}", "", "redisson_lockish:{job1}"));
}
END_TEST

START_TEST(registry_entries) {
    char host[16];
    long long pid;
    const char *e = "1795809956350 dlockd:vm-1.example:20712";
    list_registry_entry(e, strlen(e), host, sizeof(host), &pid);
    ck_assert_str_eq(host, "vm-1.example");
    ck_assert_int_eq(pid, 20712);
    /* a host name with a ':' keeps it up to the last one; odd bytes show as '?' */
    e = "1 dlockd:a:b/c:7";
    list_registry_entry(e, strlen(e), host, sizeof(host), &pid);
    ck_assert_str_eq(host, "a?b?c");
    ck_assert_int_eq(pid, 7);
    /* cut to the buffer */
    e = "1 dlockd:a-very-long-host-name:9";
    list_registry_entry(e, strlen(e), host, sizeof(host), &pid);
    ck_assert_str_eq(host, "a-very-long-hos");
    ck_assert_int_eq(pid, 9);
    static const char *const bad[] = {"", "1", "1 dlockd:", "1 other:h:1", "1 dlockd:h:",
                                      "1 dlockd:h:x1", "1 dlockd::5", "1 dlockd:h:12345678901"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        list_registry_entry(bad[i], strlen(bad[i]), host, sizeof(host), &pid);
        ck_assert_msg(host[0] == '\0' && pid == -1, "'%s': host '%s' pid %lld", bad[i], host,
                      pid);
    }
}
END_TEST

/* An election's value as LIST and LEADER tell it: one word, cut to the
 * buffer; bytes outside 0x21-0x7E as '?'. */
START_TEST(values_stay_one_word) {
    char out[8];
    backend_clean_value(out, sizeof(out), "10.0.0.5:80", 11);
    ck_assert_str_eq(out, "10.0.0.");
    backend_clean_value(out, sizeof(out), "a b\nc\r", 6);
    ck_assert_str_eq(out, "a?b?c?");
    backend_clean_value(out, sizeof(out), "!\x7f\x80\xff~", 5);
    ck_assert_str_eq(out, "!?" "?" "?~");
    backend_clean_value(out, sizeof(out), "", 0);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(owner_fields) {
    uint64_t id = 0;
    const char *u = "0b1e7b9c-0000-4000-8000-000000000001";
    char f[128];
    snprintf(f, sizeof(f), "%s:42", u);
    ck_assert_uint_eq(list_field_uuid(f, &id), strlen(u));
    ck_assert_uint_eq(id, 42);
    /* a write hold (Redisson's form): the same uuid and id */
    snprintf(f, sizeof(f), "%s:7%s", u, LIST_WRITE_SUFFIX);
    ck_assert_uint_eq(list_field_uuid(f, &id), strlen(u));
    ck_assert_uint_eq(id, 7);
    /* a read hold: no suffix */
    snprintf(f, sizeof(f), "%s:8", u);
    ck_assert_uint_eq(list_field_uuid(f, &id), strlen(u));
    ck_assert_uint_eq(id, 8);
    ck_assert_uint_eq(list_field_uuid("nocolon", &id), 0);
    ck_assert_uint_eq(list_field_uuid(":5", &id), 0);
    ck_assert_uint_eq(list_field_uuid(":write", &id), 0);
}
END_TEST

static list_entry_t ent(const char *name, const char *holder, long long ttl, uint64_t fence) {
    list_entry_t e;
    memset(&e, 0, sizeof(e));
    snprintf(e.name, sizeof(e.name), "%s", name);
    e.len = strlen(name);
    e.kind = BACKEND_MUTEX;
    e.ttl_ms = ttl;
    e.fence = fence;
    if (holder != NULL) {
        e.nholders = e.holders_total = 1;
        snprintf(e.holders[0].field, sizeof(e.holders[0].field), "%s", holder);
    }
    return e;
}

START_TEST(sorted_by_name) {
    list_entry_t a[4] = {ent("b", NULL, -1, 0), ent("ab", NULL, -1, 0), ent("a", NULL, -1, 0),
                         ent("B", NULL, -1, 0)};
    qsort(a, 4, sizeof(a[0]), list_entry_cmp);
    ck_assert_str_eq(a[0].name, "B");
    ck_assert_str_eq(a[1].name, "a");
    ck_assert_str_eq(a[2].name, "ab");
    ck_assert_str_eq(a[3].name, "b");
}
END_TEST

START_TEST(majority_keeps_what_most_agree_on) {
    /* three nodes: x held by u:1 on all three (ttls 900/800/-, fences 5/6/4);
     * y by u:1 on two and u:2 on one; z on one node only; w by three
     * different holders */
    list_entry_t a[] = {
        ent("w", "a:1", 100, 1), ent("w", "b:1", 100, 1), ent("w", "c:1", 100, 1),
        ent("x", "u:1", 900, 5), ent("x", "u:1", 800, 6), ent("x", "u:1", -1, 4),
        ent("y", "u:1", 500, 2), ent("y", "u:2", 400, 9), ent("y", "u:1", 600, 3),
        ent("z", "u:1", 500, 2),
    };
    size_t n = list_majority(a, sizeof(a) / sizeof(a[0]), 2);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(a[0].name, "x");
    ck_assert_int_eq(a[0].ttl_ms, 800);       /* the smallest */
    ck_assert_uint_eq(a[0].fence, 6);         /* the greatest */
    ck_assert_int_eq(a[0].agree, 3);
    ck_assert_str_eq(a[1].name, "y");
    ck_assert_str_eq(a[1].holders[0].field, "u:1");
    ck_assert_int_eq(a[1].ttl_ms, 500);
    ck_assert_uint_eq(a[1].fence, 3);         /* not the other holder's 9 */
    ck_assert_int_eq(a[1].agree, 2);
    /* a kind that differs is another lock */
    list_entry_t b[] = {ent("k", "u:1", 100, 1), ent("k", "u:1", 100, 1)};
    b[1].kind = BACKEND_WRITE;
    ck_assert_uint_eq(list_majority(b, 2, 2), 0);
    ck_assert_uint_eq(list_majority(b, 0, 2), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("list");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, match_escapes_the_prefix);
    tcase_add_test(tc, key_name_keeps_locks_only);
    tcase_add_test(tc, registry_entries);
    tcase_add_test(tc, values_stay_one_word);
    tcase_add_test(tc, owner_fields);
    tcase_add_test(tc, sorted_by_name);
    tcase_add_test(tc, majority_keeps_what_most_agree_on);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
