/* Unit tests of the lock manager's hand-over records (daemon/lock/handover.c): holds taken back as they were, nothing sent, timers going on.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "daemon/util/statefmt.h"
#include "tests/unit/lockmgr_support.h"

/* The old process's manager and owners: their memory would go with its
 * exit; here it is freed by hand (lockmgr_free frees the holds, not the
 * owners, which a lock manager frees only as it drops them). */
static lockmgr_t *old_mgr;
static lock_owner_t *old_owners[MAX_CLIENTS];
static size_t old_count;

/* Writes every client's records and the manager's, as the old process
 * does (an "owner" record before each client's), once nothing is in
 * flight to Redis: the old process waits for that too. */
static void save_all(buf_t *b) {
    statew_t w;
    fake_settle(fb);
    ck_assert_ptr_null(lockmgr_busy(mgr));
    statew_init(&w, b);
    for (size_t i = 0; i < nclients; i++) {
        statew_rec(&w, "owner");
        statew_u64(&w, clients[i].id);
        lockmgr_owner_save(mgr, clients[i].o, &w);
    }
    lockmgr_save(mgr, &w);
    ck_assert_int_eq(statew_finish(&w), 0);
}

/* The new process: a new manager on the same Redis, owners with the same
 * ids, every record read. Returns the reader's error (0: none). */
static int load_all(const buf_t *b, size_t n) {
    old_mgr = mgr;
    old_count = nclients;
    for (size_t i = 0; i < nclients; i++) old_owners[i] = clients[i].o;
    mgr = lockmgr_new(&conf, tm, fake_backend(fb));
    ck_assert_ptr_nonnull(mgr);
    nclients = 0;
    for (size_t i = 0; i < n; i++) client();
    stater_t r;
    char word[STATE_WORD_MAX];
    client_t *cur = NULL;
    stater_init(&r, buf_start(b), b->len);
    while (stater_rec(&r, word)) {
        if (strcmp(word, "owner") == 0) {
            uint64_t id = stater_u64(&r);
            ck_assert(id >= 1 && id <= nclients);
            cur = &clients[id - 1];
            continue;
        }
        if (!lockmgr_load(mgr, cur ? cur->o : NULL, word, &r))
            ck_abort_msg("a record the manager does not know: %s", word);
    }
    ck_assert_int_eq(lockmgr_load_done(mgr), 0);
    return r.err;
}

static void free_old(void) {
    lockmgr_free(old_mgr);
    old_mgr = NULL;
    for (size_t i = 0; i < old_count; i++) free(old_owners[i]);
    old_count = 0;
}

/* Holds of every sort come back with their fence, count and mode, and
 * taking them back sends nothing to Redis. */
START_TEST(test_holds_come_back) {
    client_t *a = client(), *b = client();
    uint64_t fa = lock_ok(a, "a", 0);
    ck_assert_int_eq(lock_req(a, "a", 0), 0); /* reentry: 2 holds */
    fake_run(fb);
    expect_granted(a, 2);
    uint64_t fr = rlock_ok(b, "r", 0);
    ck_assert_int_eq(seminit_req(b, "s", 5), 0);
    fake_run(fb);
    next_reply(b);
    ck_assert_int_eq(acquire_req(b, "s", 3, 0), 0);
    fake_run(fb);
    next_reply(b);
    run_for(400);
    lockmgr_stats_t before = stats();

    buf_t buf = {0};
    save_all(&buf);
    size_t sent = fake_log_len(fb);
    ck_assert_int_eq(load_all(&buf, 2), 0);
    free_old();
    ck_assert_uint_eq(fake_log_len(fb), sent);
    ck_assert_uint_eq(fake_queued(fb), 0);
    lockmgr_stats_t after = stats();
    ck_assert_uint_eq(after.locks_held, before.locks_held);
    ck_assert_uint_eq(after.grants, before.grants);
    ck_assert_uint_eq(after.reentries, before.reentries);

    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "a", 0, 0), 0);
    fake_run(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_MINE);
    ck_assert_int_eq(r.holds, 2);
    ck_assert_uint_eq(r.fence, fa);
    ck_assert_int_eq(request_mode(b, LOCK_VERB_STATUS, LOCK_MODE_READ, "r", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_RW);
    ck_assert_int_eq(r.holds, 1);
    (void)fr;
    /* The permits are the owner's 3 ids: giving 2 back leaves 1. */
    release_req(b, "s", 2);
    fake_run(fb);
    expect_value(b, 1);
    ck_assert(fake_sem_ids_are(fb, "s", b->id, 1));
    /* Releases go as from the old process. */
    unlock_req(a, "a");
    fake_run(fb);
    expect_value(a, 1);
    unlock_req(a, "a");
    fake_run(fb);
    expect_value(a, 0);
    ck_assert_int_eq(fake_holds(fb, a->id, "a"), 0);
    buf_free(&buf);
}
END_TEST

/* The watchdog keeps a hold taken back renewed, and a lease taken back
 * ends when it would have: counted from the grant, not the hand-over. */
START_TEST(test_timers_go_on) {
    client_t *a = client();
    lock_ok(a, "w", 0);
    ck_assert_int_eq(lock_req(a, "l", 2000), 0);
    fake_run(fb);
    expect_granted(a, 1);
    uint64_t granted = now();
    timers_advance(tm, 1500); /* the watchdog renewed w meanwhile: save settles it */
    buf_t buf = {0};
    save_all(&buf);
    ck_assert_int_eq(load_all(&buf, 1), 0);
    free_old();
    timers_advance(tm, 499);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(now() - granted, 2000);
    fake_settle(fb);
    stays_watchdog(a, "w");
    buf_free(&buf);
}
END_TEST

/* A record that is not one this manager knows, or contradicts another,
 * is an error, and nothing of it is held. */
START_TEST(test_bad_records) {
    static const char *const texts[] = {
        "hold 1:x NOSUCH 1 5 0 0 0 0 0\n",           /* an unknown mode */
        "hold 1:x MUTEX 0 5 0 0 0 0 0\n",            /* no count */
        "hold 1:x MUTEX 1 5 0 0 0 0 0\nhold 1:x MUTEX 1 6 0 0 0 0 0\n", /* twice */
        "hold 1:x MUTEX 1 5 0 0 0 0 0\nhold 1:x SEM 1 0 0 0 0 0 0\n",   /* two kinds */
        "hold 1:x MUTEX 1 5\n",                      /* fields missing */
        "observe 0: 0 1\n",                          /* a name missing */
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        client_t *a = client();
        stater_t r;
        char word[STATE_WORD_MAX];
        stater_init(&r, texts[i], strlen(texts[i]));
        while (stater_rec(&r, word)) ck_assert(lockmgr_load(mgr, a->o, word, &r));
        ck_assert_msg(r.err, "text %zu was taken", i);
        drop(a);
        fake_settle(fb);
    }
    /* A record without an owner is no hold of anyone's. */
    stater_t r;
    char word[STATE_WORD_MAX];
    static const char text[] = "hold 1:y MUTEX 1 5 0 0 0 0 0\n";
    stater_init(&r, text, sizeof(text) - 1);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    ck_assert(lockmgr_load(mgr, NULL, word, &r));
    ck_assert(r.err);
}
END_TEST

/* Counters carry over; an unknown counter is skipped. */
START_TEST(test_counters) {
    client_t *a = client();
    lock_ok(a, "c", 0);
    unlock_req(a, "c");
    fake_run(fb);
    expect_value(a, 0);
    lockmgr_stats_t before = stats();
    uint64_t hold_times = before.hold_time->n; /* the old manager's memory */
    ck_assert_uint_eq(hold_times, 1);
    buf_t buf = {0};
    save_all(&buf);
    buf_append(&buf, "counter no_such_counter 7\n", 26);
    ck_assert_int_eq(load_all(&buf, 1), 0);
    free_old();
    lockmgr_stats_t after = stats();
    ck_assert_uint_eq(after.grants, before.grants);
    ck_assert_uint_eq(after.releases, before.releases);
    ck_assert_uint_eq(after.hold_time->n, hold_times);
    buf_free(&buf);
}
END_TEST

static Suite *handover_suite(void) {
    Suite *s = suite_create("lockmgr_handover");
    TCase *tc = tcase_create("records");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_holds_come_back);
    tcase_add_test(tc, test_timers_go_on);
    tcase_add_test(tc, test_bad_records);
    tcase_add_test(tc, test_counters);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(handover_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
