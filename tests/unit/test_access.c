/* Unit tests of conf/access (rules: parsing, checks, matching) and daemon/access
 * (connections per uid, the rate-limited deny log, /proc groups).
 * SPDX-License-Identifier: MIT */
#include "conf/access.h"
#include "daemon/access.h"

#include <check.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static access_rules_t *rules_of(const char *const *lines, size_t n) {
    access_rules_t *r = access_rules_new();
    char err[ACCESS_ERR_LEN];
    ck_assert_ptr_nonnull(r);
    for (size_t i = 0; i < n; i++) {
        char key[128];
        const char *eq = strchr(lines[i], '=');
        ck_assert_ptr_nonnull(eq);
        size_t kl = (size_t)(eq - lines[i]);
        while (kl > 0 && lines[i][kl - 1] == ' ') kl--;
        memcpy(key, lines[i], kl);
        key[kl] = '\0';
        ck_assert_msg(access_rules_add(r, key, eq + 1, (int)i + 1, err, sizeof(err)) == 0,
                      "%s: %s", lines[i], err);
    }
    uid_t admins[] = {0, 4242};
    ck_assert_int_eq(access_rules_finish(r, admins, 2), 0);
    return r;
}

static access_peer_t peer(uid_t uid, gid_t gid) {
    access_peer_t p = {.uid = uid, .ngids = 1};
    p.gids[0] = gid;
    return p;
}

static access_right_t right_on(const access_rules_t *r, access_peer_t p, const char *name) {
    int rule;
    return access_decide(r, NULL, &p, name, strlen(name), &rule);
}

static int add_fails(const char *key, const char *value, const char *want) {
    access_rules_t *r = access_rules_new();
    char err[ACCESS_ERR_LEN] = "";
    int rc = access_rules_add(r, key, value, 3, err, sizeof(err));
    access_rules_free(r);
    ck_assert_msg(rc == -1, "%s = %s was accepted", key, value);
    ck_assert_msg(strstr(err, want) != NULL, "%s = %s: '%s' lacks '%s'", key, value, err, want);
    return 1;
}

/* ---- parsing ------------------------------------------------------------- */

START_TEST(test_parse_forms) {
    access_rules_t *r = access_rules_new();
    char err[ACCESS_ERR_LEN];
    /* as conf_set gives it, and as inih splits it at the ':' */
    ck_assert_int_eq(access_rules_add(r, "uid:1000", " lock billing/* invoices/* ", 4, err,
                                      sizeof(err)), 0);
    ck_assert_int_eq(access_rules_add(r, "gid", "7 = read *", 5, err, sizeof(err)), 0);
    ck_assert_int_eq(access_rules_add(r, "*", "admin\tx?[a-c]", 6, err, sizeof(err)), 0);
    ck_assert_int_eq(access_rules_add(r, "uid", "root=lock a:b=c", 7, err, sizeof(err)), 0);
    ck_assert_uint_eq(r->count, 4);
    ck_assert_int_eq(r->rules[0].who, ACCESS_WHO_UID);
    ck_assert_uint_eq(r->rules[0].id, 1000);
    ck_assert_int_eq(r->rules[0].right, ACCESS_LOCK);
    ck_assert_uint_eq(r->rules[0].nglobs, 2);
    ck_assert_str_eq(r->rules[0].globs[1], "invoices/*");
    ck_assert_int_eq(r->rules[0].line, 4);
    ck_assert_int_eq(r->rules[1].who, ACCESS_WHO_GID);
    ck_assert_uint_eq(r->rules[1].id, 7);
    ck_assert_int_eq(r->rules[1].any_name, 1);
    ck_assert_str_eq(r->rules[1].principal, "gid:7");
    ck_assert_int_eq(r->rules[2].who, ACCESS_WHO_ANY);
    ck_assert_int_eq(r->rules[2].right, ACCESS_ADMIN);
    ck_assert_str_eq(r->rules[3].principal, "uid:root");
    ck_assert_uint_eq(r->rules[3].id, 0);
    ck_assert_int_eq(r->rules[3].known, 1);
    ck_assert_str_eq(r->rules[3].globs[0], "a:b=c");
    ck_assert_uint_eq(r->file_rules, 4);
    access_rules_free(r);
}
END_TEST

START_TEST(test_parse_unknown_name_is_kept) {
    access_rules_t *r = access_rules_new();
    char err[ACCESS_ERR_LEN];
    ck_assert_int_eq(access_rules_add(r, "uid:no-such-user-xyz", "lock *", 1, err, sizeof(err)),
                     0);
    ck_assert_int_eq(access_rules_add(r, "gid:no-such-group-xyz", "lock *", 2, err, sizeof(err)),
                     0);
    ck_assert_int_eq(r->rules[0].known, 0);
    ck_assert_int_eq(r->rules[1].known, 0);
    ck_assert_int_eq(access_rules_finish(r, NULL, 0), 0);
    access_peer_t p = peer(0, 0);
    p.uid = 5;
    ck_assert_int_eq(right_on(r, p, "x"), ACCESS_NONE); /* an unknown name matches no one */
    access_rules_free(r);
}
END_TEST

START_TEST(test_parse_errors) {
    add_fails("uid:1", "write a", "not a right");
    add_fails("uid:1", "", "expected a right");
    add_fails("uid:1", "lock", "at least one glob");
    add_fails("usr:1", "lock a", "expected uid:<user>");
    add_fails("uid:", "lock a", "expected uid:<user>");
    add_fails("uid:99999999999", "lock a", "not a number");
    add_fails("uid:12x", "lock a", "not a number");
    add_fails("uid", "1 lock a", "expected uid:<name> =");
    add_fails("uid:1", "lock a[b", "unclosed '['");
    add_fails("uid:1", "lock a\\", "lone");
    add_fails("uid:1", "lock a\x01", "0x01");
    char longglob[ACCESS_GLOB_MAX + 10];
    memset(longglob, 'a', sizeof(longglob) - 1);
    longglob[sizeof(longglob) - 1] = '\0';
    char v[sizeof(longglob) + 8];
    snprintf(v, sizeof(v), "lock %s", longglob);
    add_fails("uid:1", v, "longer than");
}
END_TEST

START_TEST(test_glob_check) {
    char err[ACCESS_ERR_LEN];
    ck_assert_int_eq(access_glob_check("a[]b]c", err, sizeof(err)), 0);
    ck_assert_int_eq(access_glob_check("a[!x]", err, sizeof(err)), 0);
    ck_assert_int_eq(access_glob_check("a\\*", err, sizeof(err)), 0);
    ck_assert_int_eq(access_glob_check("", err, sizeof(err)), -1);
    ck_assert_int_eq(access_glob_check("a[!", err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_too_many_globs) {
    char v[ACCESS_GLOBS_MAX * 4 + 16] = "lock";
    for (int i = 0; i <= ACCESS_GLOBS_MAX; i++) {
        size_t len = strlen(v);
        snprintf(v + len, sizeof(v) - len, " g%d", i);
    }
    add_fails("uid:1", v, "more than");
}
END_TEST

/* ---- matching ------------------------------------------------------------ */

START_TEST(test_default_without_rules) {
    access_rules_t *r = rules_of(NULL, 0);
    ck_assert_int_eq(right_on(r, peer(1000, 1000), "any/name"), ACCESS_LOCK);
    ck_assert_int_eq(right_on(r, peer(0, 0), "any/name"), ACCESS_ADMIN);
    ck_assert_int_eq(right_on(r, peer(4242, 1), "x"), ACCESS_ADMIN); /* admin_uids */
    access_rules_free(r);
}
END_TEST

START_TEST(test_rules_add_up) {
    const char *lines[] = {
        "uid:1000 = lock billing/* invoices/*",
        "gid:50 = read *",
        "* = read public/?",
        "uid:1001 = admin ops/[ab]*",
    };
    access_rules_t *r = rules_of(lines, 4);
    access_peer_t billing = peer(1000, 1000), ops = peer(1002, 50), other = peer(1003, 1003);
    ck_assert_int_eq(right_on(r, billing, "billing/x"), ACCESS_LOCK);
    ck_assert_int_eq(right_on(r, billing, "billing/x/y"), ACCESS_LOCK); /* no FNM_PATHNAME */
    ck_assert_int_eq(right_on(r, billing, "invoices/1"), ACCESS_LOCK);
    ck_assert_int_eq(right_on(r, billing, "other"), ACCESS_NONE);
    ck_assert_int_eq(right_on(r, billing, "public/a"), ACCESS_READ);
    ck_assert_int_eq(right_on(r, billing, "public/ab"), ACCESS_NONE);
    ck_assert_int_eq(right_on(r, ops, "billing/x"), ACCESS_READ);
    ck_assert_int_eq(right_on(r, other, "billing/x"), ACCESS_NONE);
    /* a supplementary group counts like the primary one */
    access_peer_t sup = peer(1003, 1003);
    sup.gids[sup.ngids++] = 50;
    ck_assert_int_eq(right_on(r, sup, "billing/x"), ACCESS_READ);
    ck_assert_int_eq(right_on(r, peer(1001, 1), "ops/a1"), ACCESS_ADMIN);
    ck_assert_int_eq(right_on(r, peer(1001, 1), "ops/c1"), ACCESS_NONE);
    /* with rules, still: uid 0 and admin_uids administer */
    ck_assert_int_eq(right_on(r, peer(0, 0), "x"), ACCESS_ADMIN);
    ck_assert_int_eq(right_on(r, peer(4242, 0), "x"), ACCESS_ADMIN);
    access_rules_free(r);
}
END_TEST

/* A "<literal>*" glob is matched without fnmatch: the same answers. */
START_TEST(test_prefix_globs_match_as_fnmatch) {
    const char *globs[] = {"k*", "ab/*", "a*", "x\\*", "a*b", "*", "a?*", "ab"};
    const char *names[] = {"k", "k1", "kk/x", "ab/", "ab/c/d", "ab", "a", "x*", "xy", "ab2b", "b"};
    for (size_t g = 0; g < sizeof(globs) / sizeof(globs[0]); g++) {
        char err[ACCESS_ERR_LEN], v[64];
        snprintf(v, sizeof(v), "lock %s", globs[g]);
        access_rules_t *r = access_rules_new();
        ck_assert_int_eq(access_rules_add(r, "uid:5", v, 1, err, sizeof(err)), 0);
        for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
            int want = fnmatch(globs[g], names[n], 0) == 0;
            access_right_t got = right_on(r, peer(5, 5), names[n]);
            ck_assert_msg((got == ACCESS_LOCK) == want, "%s against %s: %d, fnmatch %d", globs[g],
                          names[n], got, want);
        }
        access_rules_free(r);
    }
}
END_TEST

START_TEST(test_view_caches_and_follows_generation) {
    const char *lines[] = {"uid:1000 = read a/*", "uid:1000 = lock a/b*", "uid:7 = lock *"};
    access_rules_t *r = rules_of(lines, 3);
    access_view_t v = {0};
    access_peer_t p = peer(1000, 1000);
    int rule;
    ck_assert_int_eq(access_decide(r, &v, &p, "a/x", 3, &rule), ACCESS_READ);
    ck_assert_int_eq(rule, 0);
    ck_assert_uint_eq(v.n, 2); /* uid:7's rule and the admins' are not its */
    ck_assert_int_eq(access_decide(r, &v, &p, "a/bc", 4, &rule), ACCESS_LOCK);
    ck_assert_int_eq(rule, 1);
    ck_assert_int_eq(access_decide(r, &v, &p, "a/bc", 4, &rule), ACCESS_LOCK); /* cached */
    ck_assert_int_eq(access_decide(r, &v, &p, "b", 1, &rule), ACCESS_NONE);
    ck_assert_int_eq(rule, -1);
    /* a reload: a new rule set, a new generation; the view follows */
    const char *lines2[] = {"uid:1000 = read b"};
    access_rules_t *r2 = rules_of(lines2, 1);
    ck_assert_uint_ne(r->generation, r2->generation);
    ck_assert_int_eq(access_decide(r2, &v, &p, "b", 1, &rule), ACCESS_READ);
    ck_assert_int_eq(access_decide(r2, &v, &p, "a/bc", 4, &rule), ACCESS_NONE);
    ck_assert_int_eq(access_best(r2, &v, &p, &rule), ACCESS_READ);
    access_view_free(&v);
    access_rules_free(r);
    access_rules_free(r2);
}
END_TEST

START_TEST(test_explain) {
    const char *lines[] = {"gid:50 = read *"};
    access_rules_t *r = rules_of(lines, 1);
    char out[256];
    access_peer_t p = peer(1000, 50);
    int rule;
    ck_assert_int_eq(access_decide(r, NULL, &p, "x/y", 3, &rule), ACCESS_READ);
    access_explain(r, rule, &p, ACCESS_LOCK, "x/y", 3, out, sizeof(out));
    ck_assert_str_eq(out, "rule gid:50 = read (line 1) grants uid 1000 only read on x/y, not lock");
    access_explain(r, -1, &p, ACCESS_ADMIN, NULL, 0, out, sizeof(out));
    ck_assert_str_eq(out, "no rule grants uid 1000 admin on any name");
    access_rules_free(r);
}
END_TEST

/* ---- checks (dlockd -t) --------------------------------------------------- */

typedef struct warnings_s {
    char text[8][512];
    size_t n;
} warnings_t;

static void on_warn(void *data, const char *msg) {
    warnings_t *w = data;
    if (w->n < 8) snprintf(w->text[w->n], sizeof(w->text[0]), "%s", msg);
    w->n++;
}

START_TEST(test_check_warnings) {
    const char *lines[] = {
        "uid:no-such-user-xyz = lock a/*", /* 1: unknown */
        "uid:1000 = lock app/*",           /* 2: overlaps 6, which grants more */
        "uid:1000 = read app/x app/y",     /* 3: both unreachable */
        "* = lock pub/*",                  /* 4 */
        "uid:1000 = lock pub/a",           /* 5: unreachable through * */
        "uid:1000 = admin app/*",          /* 6 */
        "uid:1001 = read b/*",             /* 7: fine */
    };
    access_rules_t *r = rules_of(lines, 7);
    warnings_t w = {0};
    size_t n = access_rules_check(r, "f.conf", on_warn, &w);
    ck_assert_uint_eq(n, w.n);
    ck_assert_uint_eq(n, 5);
    ck_assert_msg(strstr(w.text[0], "f.conf:1: uid:no-such-user-xyz: no such user") != NULL, "%s",
                  w.text[0]);
    ck_assert_msg(strstr(w.text[1], "f.conf:2:") && strstr(w.text[1], "overlaps line 6"), "%s",
                  w.text[1]);
    ck_assert_msg(strstr(w.text[2], "f.conf:3:") && strstr(w.text[2], "app/x is unreachable"),
                  "%s", w.text[2]);
    ck_assert_msg(strstr(w.text[3], "app/y is unreachable"), "%s", w.text[3]);
    ck_assert_msg(strstr(w.text[4], "f.conf:5:") && strstr(w.text[4], "unreachable"), "%s",
                  w.text[4]);
    access_rules_free(r);
}
END_TEST

START_TEST(test_check_duplicates_said_once) {
    const char *lines[] = {"uid:1000 = lock a/*", "uid:1000 = lock a/*"};
    access_rules_t *r = rules_of(lines, 2);
    warnings_t w = {0};
    ck_assert_uint_eq(access_rules_check(r, "f", on_warn, &w), 1);
    ck_assert_msg(strstr(w.text[0], "f:2:") != NULL, "%s", w.text[0]);
    access_rules_free(r);
}
END_TEST

/* ---- /proc/<pid>/status --------------------------------------------------- */

START_TEST(test_parse_groups) {
    const char *status = "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n"
                         "Groups:\t4 24 100 27 \nNSpid:\t1\n";
    gid_t g[ACCESS_GROUPS_MAX] = {100};
    ck_assert_int_eq(access_parse_groups(status, 1000, g, 1, ACCESS_GROUPS_MAX), 3);
    ck_assert_uint_eq(g[1], 4);
    ck_assert_uint_eq(g[2], 24);
    ck_assert_uint_eq(g[3], 27); /* 100 was there already */
    ck_assert_int_eq(access_parse_groups(status, 1001, g, 1, ACCESS_GROUPS_MAX), -1);
    ck_assert_int_eq(access_parse_groups("Uid:\t5\t5\t5\t5\nGroups:\n", 5, g, 1, 8), 0);
    ck_assert_int_eq(access_parse_groups(status, 1000, g, 1, 2), 1); /* capped */
    ck_assert_int_eq(access_parse_groups("", 0, g, 1, 8), -1);
}
END_TEST

START_TEST(test_peer_read_self) {
    access_peer_t p;
    ck_assert_int_ge(access_peer_read(&p, getpid(), getuid(), getgid()), 0);
    ck_assert_uint_eq(p.uid, getuid());
    ck_assert_uint_eq(p.gids[0], getgid());
    ck_assert_int_eq(access_peer_read(&p, getpid(), getuid() + 1, getgid()), -1);
    ck_assert_uint_eq(p.ngids, 1);
}
END_TEST

/* ---- connections per uid, the deny log ------------------------------------ */

START_TEST(test_users_limit) {
    access_users_t u;
    ck_assert_int_eq(access_users_init(&u), 0);
    ck_assert_int_eq(access_users_join(&u, 7, 2), 0);
    ck_assert_int_eq(access_users_join(&u, 7, 2), 0);
    ck_assert_int_eq(access_users_join(&u, 7, 2), 1);   /* at its limit */
    ck_assert_int_eq(access_users_join(&u, 8, 2), 0);   /* another uid is not */
    ck_assert_uint_eq(access_users_count(&u, 7), 2);
    access_users_leave(&u, 7);
    ck_assert_int_eq(access_users_join(&u, 7, 2), 0);
    access_users_leave(&u, 7);
    access_users_leave(&u, 7);
    access_users_leave(&u, 8);
    ck_assert_uint_eq(access_users_count(&u, 7), 0);
    ck_assert_uint_eq(u.map.count, 0);
    access_users_free(&u);
}
END_TEST

START_TEST(test_deny_log_once_a_minute) {
    access_log_t l;
    uint64_t more;
    ck_assert_int_eq(access_log_init(&l), 0);
    uint64_t t = 1000000;
    ck_assert_int_eq(access_log_deny(&l, 7, 3, t, &more), 1);
    ck_assert_uint_eq(more, 0);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(access_log_deny(&l, 7, 3, t + 10 + i, &more), 0);
    /* another rule, another uid: their own lines */
    ck_assert_int_eq(access_log_deny(&l, 7, 4, t + 20, &more), 1);
    ck_assert_int_eq(access_log_deny(&l, 8, 3, t + 20, &more), 1);
    ck_assert_int_eq(access_log_deny(&l, 7, 3, t + ACCESS_LOG_EVERY_MS - 1, &more), 0);
    ck_assert_int_eq(access_log_deny(&l, 7, 3, t + ACCESS_LOG_EVERY_MS, &more), 1);
    ck_assert_uint_eq(more, 6); /* the ones not said */
    ck_assert_int_eq(access_log_deny(&l, 7, 3, t + ACCESS_LOG_EVERY_MS + 1, &more), 0);
    access_log_free(&l);
}
END_TEST

START_TEST(test_deny_log_bounded) {
    access_log_t l;
    uint64_t more;
    ck_assert_int_eq(access_log_init(&l), 0);
    for (uid_t u = 0; u < ACCESS_LOG_KEYS_MAX + 10; u++)
        ck_assert_int_eq(access_log_deny(&l, u, -1, 5, &more), 1);
    ck_assert_uint_le(l.map.count, ACCESS_LOG_KEYS_MAX);
    /* a period later, old pairs make room */
    ck_assert_int_eq(access_log_deny(&l, 999999, -1, 5 + ACCESS_LOG_EVERY_MS, &more), 1);
    ck_assert_uint_le(l.map.count, 2);
    access_log_free(&l);
}
END_TEST

static Suite *access_suite(void) {
    Suite *s = suite_create("access");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_parse_forms);
    tcase_add_test(tc, test_parse_unknown_name_is_kept);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_glob_check);
    tcase_add_test(tc, test_too_many_globs);
    suite_add_tcase(s, tc);
    tc = tcase_create("match");
    tcase_add_test(tc, test_default_without_rules);
    tcase_add_test(tc, test_rules_add_up);
    tcase_add_test(tc, test_prefix_globs_match_as_fnmatch);
    tcase_add_test(tc, test_view_caches_and_follows_generation);
    tcase_add_test(tc, test_explain);
    suite_add_tcase(s, tc);
    tc = tcase_create("check");
    tcase_add_test(tc, test_check_warnings);
    tcase_add_test(tc, test_check_duplicates_said_once);
    suite_add_tcase(s, tc);
    tc = tcase_create("peer");
    tcase_add_test(tc, test_parse_groups);
    tcase_add_test(tc, test_peer_read_self);
    suite_add_tcase(s, tc);
    tc = tcase_create("runtime");
    tcase_add_test(tc, test_users_limit);
    tcase_add_test(tc, test_deny_log_once_a_minute);
    tcase_add_test(tc, test_deny_log_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(access_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
