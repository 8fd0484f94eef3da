/* Unit tests of daemon/backend/cluster_multi: the slot-then-name order, a call per slot, the undo.
 * SPDX-License-Identifier: MIT
 *
 * A recording backend stands for cluster.c: the slot of a name is its
 * first letter's digit, ops are kept in order and answered by the test. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/cluster_multi.h"

#define OPS_MAX 32

static backend_op_t *sent[OPS_MAX];
static size_t nsent;
static backend_op_t *answered; /* the parent, once called back */
static int calls;

static void rec_submit(backend_t *b, backend_op_t *op) {
    (void)b;
    ck_assert_uint_lt(nsent, OPS_MAX);
    sent[nsent++] = op;
}

static const backend_type_t rec_type = {.name = "rec", .submit = rec_submit};
static backend_t rec = {.type = &rec_type};

/* "3x" lives in slot 3. */
static unsigned slot_digit(const backend_t *b, const char *name, size_t len) {
    (void)b;
    (void)len;
    return (unsigned)(name[0] - '0');
}

/* Names with ops in the topology's hands: those starting with "1b". */
static int busy_1b(const backend_t *b, const char *name, size_t len) {
    (void)b;
    return len >= 2 && memcmp(name, "1b", 2) == 0;
}

static int busy_none(const backend_t *b, const char *name, size_t len) {
    (void)b;
    (void)name;
    (void)len;
    return 0;
}

static const cluster_multi_env_t env = {.slot_of = slot_digit, .busy = busy_none};
static const cluster_multi_env_t env_busy = {.slot_of = slot_digit, .busy = busy_1b};

static void on_parent(backend_op_t *op) {
    answered = op;
    calls++;
}

static backend_name_t names[8];
static uint64_t values[8];
static backend_op_t parent;

static void make_parent(const char *const *words, size_t n, const char *reentry) {
    nsent = 0;
    answered = NULL;
    calls = 0;
    memset(&parent, 0, sizeof(parent));
    for (size_t i = 0; i < n; i++) names[i] = (backend_name_t){words[i], strlen(words[i])};
    parent.type = BACKEND_ACQUIRE;
    parent.mode = BACKEND_MULTI;
    parent.name = names[0].name;
    parent.len = names[0].len;
    parent.owner = 7;
    parent.lease_ms = 30000;
    parent.names = names;
    parent.nnames = n;
    parent.reentry = reentry;
    parent.values = values;
    parent.cb = on_parent;
}

/* Answers sent[i] as OK with outcome. */
static void answer(size_t i, backend_outcome_t outcome) {
    backend_op_t *op = sent[i];
    memset(&op->res, 0, sizeof(op->res));
    op->res.status = BACKEND_OK;
    op->res.outcome = outcome;
    op->cb(op);
}

static int has_name(const backend_op_t *op, size_t k, const char *want) {
    return op->names[k].len == strlen(want) && memcmp(op->names[k].name, want, op->names[k].len) == 0;
}

START_TEST(plan_orders_by_slot_then_name) {
    const char *w[] = {"2b", "1z", "2a", "1y", "3q", "2ab"};
    backend_name_t nm[6];
    unsigned slot[6];
    size_t order[6], ends[6];
    for (size_t i = 0; i < 6; i++) {
        nm[i] = (backend_name_t){w[i], strlen(w[i])};
        slot[i] = (unsigned)(w[i][0] - '0');
    }
    ck_assert_uint_eq(cluster_multi_plan(slot, nm, 6, order, ends), 3);
    size_t want[] = {3, 1, 2, 5, 0, 4}; /* 1y 1z 2a 2ab 2b 3q */
    for (size_t k = 0; k < 6; k++) ck_assert_uint_eq(order[k], want[k]);
    ck_assert_uint_eq(ends[0], 2);
    ck_assert_uint_eq(ends[1], 5);
    ck_assert_uint_eq(ends[2], 6);
    ck_assert_uint_eq(cluster_multi_plan(slot, nm, 1, order, ends), 1);
    ck_assert_uint_eq(ends[0], 1);
    ck_assert_uint_eq(cluster_multi_plan(slot, nm, 0, order, ends), 0);
}
END_TEST

START_TEST(split_only_across_slots) {
    const char *one[] = {"4a", "4b"}, *two[] = {"4a", "5b"};
    make_parent(one, 2, "nn");
    ck_assert_int_eq(cluster_multi_split(&rec, &env, &parent), 0);
    make_parent(two, 2, "nn");
    ck_assert_int_eq(cluster_multi_split(&rec, &env, &parent), 1);
    parent.mode = BACKEND_MUTEX;
    ck_assert_int_eq(cluster_multi_split(&rec, &env, &parent), 0);
    /* one slot, but a later name has ops in the topology's hands */
    const char *held[] = {"1a", "1b"};
    make_parent(held, 2, "nn");
    ck_assert_int_eq(cluster_multi_split(&rec, &env_busy, &parent), 1);
    ck_assert_int_eq(cluster_multi_split(&rec, &env, &parent), 0);
}
END_TEST

/* A group goes only once a STATUS behind each of its other names' ops
 * answered; the group itself is not split again. */
START_TEST(barrier_before_busy_names) {
    const char *w[] = {"1bb", "1a", "1b"};
    make_parent(w, 3, "nnn");
    ck_assert_int_eq(cluster_multi_submit(&rec, &env_busy, &parent), 0);
    ck_assert_uint_eq(nsent, 2); /* STATUS of 1b and of 1bb */
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(sent[i]->type, BACKEND_STATUS);
        ck_assert_int_eq(sent[i]->mode, BACKEND_MUTEX);
    }
    answer(0, BACKEND_GRANTED);
    ck_assert_uint_eq(nsent, 2);
    answer(1, BACKEND_GRANTED);
    ck_assert_uint_eq(nsent, 3);
    ck_assert_uint_eq(sent[2]->nnames, 3);
    ck_assert(has_name(sent[2], 0, "1a"));
    ck_assert_int_eq(cluster_multi_split(&rec, &env_busy, sent[2]), 0);
    for (size_t k = 0; k < 3; k++) sent[2]->values[k] = 10 + k; /* 1a 1b 1bb */
    answer(2, BACKEND_GRANTED);
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(values[0], 12);
    ck_assert_uint_eq(values[1], 10);
    ck_assert_uint_eq(values[2], 11);
}
END_TEST

/* Granted group by group, in order; the values back in the parent's. */
START_TEST(granted_in_order) {
    const char *w[] = {"9z", "1b", "1a"};
    make_parent(w, 3, "nrn");
    ck_assert_int_eq(cluster_multi_submit(&rec, &env, &parent), 0);
    ck_assert_uint_eq(nsent, 1);
    ck_assert_int_eq(calls, 0);
    ck_assert_uint_eq(sent[0]->nnames, 2); /* slot 1: 1a then 1b */
    ck_assert(has_name(sent[0], 0, "1a") && has_name(sent[0], 1, "1b"));
    ck_assert_int_eq(memcmp(sent[0]->reentry, "nr", 2), 0);
    ck_assert_uint_eq(sent[0]->owner, 7);
    sent[0]->values[0] = 100; /* 1a's fence */
    sent[0]->values[1] = 2;   /* 1b's holds */
    answer(0, BACKEND_GRANTED);
    ck_assert_uint_eq(nsent, 2);
    ck_assert_uint_eq(sent[1]->nnames, 1);
    ck_assert(has_name(sent[1], 0, "9z"));
    sent[1]->values[0] = 300;
    answer(1, BACKEND_GRANTED);
    ck_assert_int_eq(calls, 1);
    ck_assert_ptr_eq(answered, &parent);
    ck_assert_int_eq(parent.res.status, BACKEND_OK);
    ck_assert_int_eq(parent.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_eq(values[0], 300);
    ck_assert_uint_eq(values[1], 2);
    ck_assert_uint_eq(values[2], 100);
}
END_TEST

/* A later slot refuses: the earlier groups are undone (a new name
 * released, a reentry one hold less) before the answer, which names the
 * refusing name by the parent's index. */
START_TEST(refused_later_undoes_earlier) {
    const char *w[] = {"3c", "1a", "2b", "2r"};
    make_parent(w, 4, "nnnr");
    ck_assert_int_eq(cluster_multi_submit(&rec, &env, &parent), 0);
    answer(0, BACKEND_GRANTED);                 /* 1a */
    ck_assert(has_name(sent[1], 0, "2b") && has_name(sent[1], 1, "2r"));
    answer(1, BACKEND_GRANTED);                 /* 2b 2r */
    ck_assert(has_name(sent[2], 0, "3c"));
    sent[2]->res = (backend_result_t){.status = BACKEND_OK, .outcome = BACKEND_TAKEN,
                                      .ttl_ms = 1234, .which = 0};
    sent[2]->cb(sent[2]);
    ck_assert_int_eq(calls, 0);                 /* the undo first */
    ck_assert_uint_eq(nsent, 6);
    int rel = 0, drop = 0;
    for (size_t i = 3; i < 6; i++) {
        ck_assert_int_eq(sent[i]->mode, BACKEND_MUTEX);
        ck_assert_uint_eq(sent[i]->owner, 7);
        if (sent[i]->type == BACKEND_DROP) {
            drop++;
            ck_assert(sent[i]->len == 2 && memcmp(sent[i]->name, "2r", 2) == 0);
        } else {
            ck_assert_int_eq(sent[i]->type, BACKEND_RELEASE);
            rel++;
        }
    }
    ck_assert_int_eq(rel, 2);
    ck_assert_int_eq(drop, 1);
    answer(3, BACKEND_GRANTED);
    answer(4, BACKEND_GRANTED);
    ck_assert_int_eq(calls, 0);
    sent[5]->res = (backend_result_t){.status = BACKEND_DOWN, .error = "gone"};
    sent[5]->cb(sent[5]);                       /* a failed undo: its lease ends it */
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(parent.res.status, BACKEND_OK);
    ck_assert_int_eq(parent.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(parent.res.ttl_ms, 1234);
    ck_assert_uint_eq(parent.res.which, 0);     /* "3c" */
}
END_TEST

/* The first group refused: nothing to undo, the answer at once; which
 * maps back through the order. A failure keeps its error text. */
START_TEST(refused_first_and_failed) {
    const char *w[] = {"5x", "1b", "1a"};
    make_parent(w, 3, "nnn");
    ck_assert_int_eq(cluster_multi_submit(&rec, &env, &parent), 0);
    sent[0]->res = (backend_result_t){.status = BACKEND_OK, .outcome = BACKEND_WRONG_KIND,
                                      .held = BACKEND_READ, .which = 1};
    sent[0]->cb(sent[0]);
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(nsent, 1);
    ck_assert_int_eq(parent.res.outcome, BACKEND_WRONG_KIND);
    ck_assert_int_eq(parent.res.held, BACKEND_READ);
    ck_assert_uint_eq(parent.res.which, 1);     /* "1b" */

    make_parent(w, 3, "nnn");
    ck_assert_int_eq(cluster_multi_submit(&rec, &env, &parent), 0);
    answer(0, BACKEND_GRANTED);
    sent[1]->res = (backend_result_t){.status = BACKEND_DOWN, .error = "cluster: slot 5 down"};
    sent[1]->cb(sent[1]);
    ck_assert_uint_eq(nsent, 4);                /* 1a 1b released */
    answer(2, BACKEND_GRANTED);
    answer(3, BACKEND_GRANTED);
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(parent.res.status, BACKEND_DOWN);
    ck_assert_str_eq(parent.res.error, "cluster: slot 5 down");
}
END_TEST

static Suite *cluster_multi_suite(void) {
    Suite *s = suite_create("cluster_multi");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, plan_orders_by_slot_then_name);
    tcase_add_test(tc, split_only_across_slots);
    tcase_add_test(tc, granted_in_order);
    tcase_add_test(tc, barrier_before_busy_names);
    tcase_add_test(tc, refused_later_undoes_earlier);
    tcase_add_test(tc, refused_first_and_failed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(cluster_multi_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
