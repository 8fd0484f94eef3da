/* Unit tests of daemon/util/heap: pop order, FIFO ties, removal, re-push and indexes.
 * SPDX-License-Identifier: MIT */
#include "daemon/util/heap.h"

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ------------------------------------------------------------ */

/* Checks every index and the heap order of the whole array. */
static void check_heap(const heap_t *h) {
    ck_assert_uint_le(h->len, h->cap);
    for (size_t i = 0; i < h->len; i++) {
        const heap_node_t *n = h->nodes[i];
        ck_assert_uint_eq(n->index, i + 1);
        if (i > 0) {
            const heap_node_t *p = h->nodes[(i - 1) / 2];
            ck_assert_msg(p->when < n->when || (p->when == n->when && p->seq < n->seq),
                          "heap order broken at %zu: parent (%llu,%llu) child (%llu,%llu)", i,
                          (unsigned long long)p->when, (unsigned long long)p->seq,
                          (unsigned long long)n->when, (unsigned long long)n->seq);
        }
    }
}

/* Makes n nodes, not in any heap. */
static heap_node_t *make_nodes(size_t n) {
    heap_node_t *v = calloc(n, sizeof(*v));
    ck_assert_ptr_nonnull(v);
    return v;
}

/* A node's place in insertion order, for sorting a reference copy. */
typedef struct ref_s {
    uint64_t when;
    size_t order;      /* push order, breaks ties */
    heap_node_t *node;
} ref_t;

static int cmp_ref(const void *a, const void *b) {
    const ref_t *x = a, *y = b;
    if (x->when != y->when) return x->when < y->when ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Pops everything and checks it comes out in the order of want[0..n). */
static void pop_all_expect(heap_t *h, const ref_t *want, size_t n) {
    ck_assert_uint_eq(h->len, n);
    for (size_t k = 0; k < n; k++) {
        heap_node_t *min = heap_min(h);
        heap_node_t *got = heap_pop(h);
        ck_assert_ptr_eq(min, got);
        ck_assert_msg(got == want[k].node,
                      "pop %zu: got node when=%llu, want when=%llu (order %zu)", k,
                      got ? (unsigned long long)got->when : 0ull,
                      (unsigned long long)want[k].when, want[k].order);
        ck_assert_uint_eq(got->index, 0);
        ck_assert_uint_eq(h->len, n - k - 1);
    }
    ck_assert_ptr_null(heap_min(h));
    ck_assert_ptr_null(heap_pop(h));
}

/* ---- empty -------------------------------------------------------------- */

START_TEST(test_empty) {
    heap_t h;
    heap_node_t n = {.when = 5};

    heap_init(&h);
    ck_assert_ptr_null(heap_min(&h));
    ck_assert_ptr_null(heap_pop(&h));
    ck_assert_uint_eq(h.len, 0);
    heap_remove(&h, &n); /* not in it: no-op */
    ck_assert_uint_eq(h.len, 0);
    ck_assert_uint_eq(n.index, 0);

    ck_assert_int_eq(heap_push(&h, &n), 0);
    ck_assert_uint_eq(n.index, 1);
    ck_assert_ptr_eq(heap_min(&h), &n);
    ck_assert_ptr_eq(heap_pop(&h), &n);
    ck_assert_uint_eq(n.index, 0);
    ck_assert_ptr_null(heap_min(&h));
    ck_assert_ptr_null(heap_pop(&h));
    heap_free(&h);
    ck_assert_ptr_null(h.nodes);
    heap_free(&h); /* twice is fine */
}
END_TEST

/* ---- order -------------------------------------------------------------- */

/* _i is the modulus of the random deadlines: small gives many ties. */
START_TEST(test_random_pop_order) {
    enum { N = 10000 };
    heap_node_t *v = make_nodes(N);
    ref_t *ref = malloc(N * sizeof(*ref));
    heap_t h;

    ck_assert_ptr_nonnull(ref);
    srand(1);
    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = (uint64_t)rand() % (uint64_t)_i;
        ref[i] = (ref_t){v[i].when, i, &v[i]};
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
        ck_assert_uint_eq(h.len, i + 1);
    }
    check_heap(&h);
    qsort(ref, N, sizeof(*ref), cmp_ref);
    pop_all_expect(&h, ref, N);
    heap_free(&h);
    free(ref);
    free(v);
}
END_TEST

START_TEST(test_large_deadlines) {
    static const uint64_t whens[] = {UINT64_MAX, 0, UINT64_MAX - 1, 1ull << 63, 1, 0, UINT64_MAX};
    heap_node_t v[ARRAY_LEN(whens)];
    ref_t ref[ARRAY_LEN(whens)];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < ARRAY_LEN(whens); i++) {
        v[i].when = whens[i];
        ref[i] = (ref_t){whens[i], i, &v[i]};
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    qsort(ref, ARRAY_LEN(ref), sizeof(*ref), cmp_ref);
    pop_all_expect(&h, ref, ARRAY_LEN(ref));
    heap_free(&h);
}
END_TEST

START_TEST(test_equal_deadlines_fifo) {
    enum { N = 1000 };
    heap_node_t *v = make_nodes(N);
    heap_t h;

    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = 42;
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    check_heap(&h);
    for (size_t i = 0; i < N; i++) {
        heap_node_t *got = heap_pop(&h);
        ck_assert_msg(got == &v[i], "pop %zu: got node %td", i, got ? got - v : -1);
    }
    heap_free(&h);
    free(v);
}
END_TEST

START_TEST(test_ties_fifo_among_others) {
    /* Three deadlines interleaved; within each, first pushed pops first. */
    enum { N = 999 };
    heap_node_t *v = make_nodes(N);
    heap_t h;

    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = 100 - (i % 3) * 10; /* 100, 90, 80, 100, ... */
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    for (size_t r = 3; r-- > 0;) {
        for (size_t i = r; i < N; i += 3) {
            heap_node_t *got = heap_pop(&h);
            ck_assert_msg(got == &v[i], "want node %zu, got %td", i, got ? got - v : -1);
        }
    }
    ck_assert_ptr_null(heap_pop(&h));
    heap_free(&h);
    free(v);
}
END_TEST

/* ---- removal ------------------------------------------------------------ */

/* Builds a heap of n nodes with random deadlines and its sorted reference. */
static void build(heap_t *h, heap_node_t *v, ref_t *ref, size_t n, unsigned seed) {
    srand(seed);
    heap_init(h);
    for (size_t i = 0; i < n; i++) {
        v[i].when = (uint64_t)(rand() % 500);
        ref[i] = (ref_t){v[i].when, i, &v[i]};
        ck_assert_int_eq(heap_push(h, &v[i]), 0);
    }
    qsort(ref, n, sizeof(*ref), cmp_ref);
}

/* Drops node from ref (n entries); returns the new count. */
static size_t ref_drop(ref_t *ref, size_t n, const heap_node_t *node) {
    for (size_t k = 0; k < n; k++) {
        if (ref[k].node == node) {
            memmove(&ref[k], &ref[k + 1], (n - k - 1) * sizeof(*ref));
            return n - 1;
        }
    }
    ck_abort_msg("node not in reference");
    return n;
}

enum { REMOVE_FIRST, REMOVE_LAST, REMOVE_MIDDLE, REMOVE_MIN, REMOVE_CASES };

/* _i picks which array position of the heap to remove. */
START_TEST(test_remove_positions) {
    enum { N = 257 };
    heap_node_t v[N];
    ref_t ref[N];
    heap_t h;
    size_t n = N;

    memset(v, 0, sizeof(v));
    build(&h, v, ref, N, 7);
    heap_node_t *victim;
    switch (_i) {
    case REMOVE_FIRST: victim = h.nodes[0]; break;
    case REMOVE_LAST: victim = h.nodes[h.len - 1]; break;
    case REMOVE_MIDDLE: victim = h.nodes[h.len / 2]; break;
    default: victim = ref[0].node; break;
    }
    heap_remove(&h, victim);
    ck_assert_uint_eq(victim->index, 0);
    ck_assert_uint_eq(h.len, N - 1);
    check_heap(&h);
    n = ref_drop(ref, n, victim);

    /* Removing it again is a no-op. */
    heap_remove(&h, victim);
    ck_assert_uint_eq(victim->index, 0);
    ck_assert_uint_eq(h.len, N - 1);
    check_heap(&h);

    pop_all_expect(&h, ref, n);
    heap_free(&h);
}
END_TEST

START_TEST(test_remove_every_position) {
    /* For a 64-node heap, remove each array position in turn from a fresh
     * heap and check the rest still pops in order. */
    enum { N = 64 };
    for (size_t pos = 0; pos < N; pos++) {
        heap_node_t v[N];
        ref_t ref[N];
        heap_t h;

        memset(v, 0, sizeof(v));
        build(&h, v, ref, N, (unsigned)(100 + pos));
        heap_node_t *victim = h.nodes[pos];
        heap_remove(&h, victim);
        ck_assert_uint_eq(victim->index, 0);
        check_heap(&h);
        size_t n = ref_drop(ref, N, victim);
        pop_all_expect(&h, ref, n);
        heap_free(&h);
    }
}
END_TEST

START_TEST(test_remove_random_half) {
    enum { N = 10000 };
    heap_node_t *v = make_nodes(N);
    ref_t *ref = malloc(N * sizeof(*ref));
    ref_t *keep = malloc(N * sizeof(*keep));
    heap_t h;
    size_t nkeep = 0;

    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(keep);
    build(&h, v, ref, N, 1);
    srand(2);
    char *removed = calloc(N, 1);
    ck_assert_ptr_nonnull(removed);
    for (size_t i = 0; i < N; i++) {
        if (rand() % 2) {
            heap_remove(&h, &v[i]);
            ck_assert_uint_eq(v[i].index, 0);
            removed[i] = 1;
        }
        if (i % 1000 == 0) check_heap(&h);
    }
    check_heap(&h);
    for (size_t k = 0; k < N; k++)
        if (!removed[ref[k].node - v]) keep[nkeep++] = ref[k];
    pop_all_expect(&h, keep, nkeep);
    heap_free(&h);
    free(removed);
    free(keep);
    free(ref);
    free(v);
}
END_TEST

/* ---- re-push ------------------------------------------------------------ */

START_TEST(test_repush_moves) {
    enum { N = 100 };
    heap_node_t v[N];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = 1000 + i * 10;
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    /* The last one moves to the front. */
    v[N - 1].when = 1;
    ck_assert_int_eq(heap_push(&h, &v[N - 1]), 0);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);
    ck_assert_ptr_eq(heap_min(&h), &v[N - 1]);

    /* The front one moves to the back. */
    v[N - 1].when = 1000000;
    ck_assert_int_eq(heap_push(&h, &v[N - 1]), 0);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);
    ck_assert_ptr_eq(heap_min(&h), &v[0]);

    /* A middle one moves to the front, the min moves to the middle. */
    v[50].when = 0;
    ck_assert_int_eq(heap_push(&h, &v[50]), 0);
    v[0].when = 1505; /* between v[50] (old 1500) and v[51] (1510) */
    ck_assert_int_eq(heap_push(&h, &v[0]), 0);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);

    /* Expected: v[50], v[1..49], v[0], v[51..98], v[99]. */
    ck_assert_ptr_eq(heap_pop(&h), &v[50]);
    for (size_t i = 1; i < 50; i++) ck_assert_ptr_eq(heap_pop(&h), &v[i]);
    ck_assert_ptr_eq(heap_pop(&h), &v[0]);
    for (size_t i = 51; i < N - 1; i++) ck_assert_ptr_eq(heap_pop(&h), &v[i]);
    ck_assert_ptr_eq(heap_pop(&h), &v[N - 1]);
    ck_assert_ptr_null(heap_pop(&h));
    heap_free(&h);
}
END_TEST

START_TEST(test_repush_same_deadline_goes_last) {
    /* Re-pushing gets a new sequence number: it queues behind its equals. */
    heap_node_t v[4];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < 4; i++) {
        v[i].when = 7;
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    ck_assert_int_eq(heap_push(&h, &v[0]), 0);
    ck_assert_int_eq(heap_push(&h, &v[2]), 0);
    ck_assert_uint_eq(h.len, 4);
    check_heap(&h);
    ck_assert_ptr_eq(heap_pop(&h), &v[1]);
    ck_assert_ptr_eq(heap_pop(&h), &v[3]);
    ck_assert_ptr_eq(heap_pop(&h), &v[0]);
    ck_assert_ptr_eq(heap_pop(&h), &v[2]);
    ck_assert_ptr_null(heap_pop(&h));
    heap_free(&h);
}
END_TEST

START_TEST(test_push_after_pop_and_remove) {
    heap_node_t a = {.when = 3}, b = {.when = 2};
    heap_t h;

    heap_init(&h);
    ck_assert_int_eq(heap_push(&h, &a), 0);
    ck_assert_int_eq(heap_push(&h, &b), 0);
    ck_assert_ptr_eq(heap_pop(&h), &b);
    ck_assert_uint_eq(b.index, 0);
    heap_remove(&h, &a);
    ck_assert_uint_eq(a.index, 0);
    ck_assert_uint_eq(h.len, 0);
    ck_assert_int_eq(heap_push(&h, &a), 0);
    ck_assert_int_eq(heap_push(&h, &b), 0);
    ck_assert_uint_eq(h.len, 2);
    ck_assert_ptr_eq(heap_pop(&h), &b);
    ck_assert_ptr_eq(heap_pop(&h), &a);
    heap_free(&h);
}
END_TEST

/* ---- random operations against a model ---------------------------------- */

START_TEST(test_random_ops_model) {
    /* Push, re-push, remove and pop at random; after each step the heap's
     * min matches the model's, which is a linear scan on (when, seq). */
    enum { N = 300, STEPS = 50000 };
    heap_node_t v[N];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    srand(3);
    for (size_t step = 0; step < STEPS; step++) {
        heap_node_t *n = &v[(size_t)rand() % N];
        int op = rand() % 4;
        size_t before = h.len;
        if (op <= 1) {
            int was_in = n->index != 0;
            n->when = (uint64_t)(rand() % 100);
            ck_assert_int_eq(heap_push(&h, n), 0);
            ck_assert_uint_eq(h.len, before + (was_in ? 0 : 1));
            ck_assert_uint_ne(n->index, 0);
        } else if (op == 2) {
            int was_in = n->index != 0;
            heap_remove(&h, n);
            ck_assert_uint_eq(h.len, before - (was_in ? 1 : 0));
            ck_assert_uint_eq(n->index, 0);
        } else {
            heap_node_t *want = NULL;
            for (size_t k = 0; k < N; k++) {
                heap_node_t *c = &v[k];
                if (c->index == 0) continue;
                if (!want || c->when < want->when || (c->when == want->when && c->seq < want->seq))
                    want = c;
            }
            heap_node_t *got = heap_pop(&h);
            ck_assert_ptr_eq(got, want);
            if (got) ck_assert_uint_eq(got->index, 0);
        }
        if (step % 97 == 0) check_heap(&h);
    }
    check_heap(&h);
    heap_free(&h);
}
END_TEST

/* ---- heap_free ---------------------------------------------------------- */

START_TEST(test_free_resets_indexes) {
    enum { N = 200 };
    heap_node_t v[N];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = (uint64_t)(N - i);
        ck_assert_int_eq(heap_push(&h, &v[i]), 0);
    }
    ck_assert_ptr_eq(heap_pop(&h), &v[N - 1]);
    heap_free(&h);
    for (size_t i = 0; i < N; i++) ck_assert_uint_eq(v[i].index, 0);
    ck_assert_ptr_null(h.nodes);
    ck_assert_uint_eq(h.len, 0);
    ck_assert_uint_eq(h.cap, 0);
    ck_assert_ptr_null(heap_min(&h));

    /* The heap and the nodes can be used again. */
    ck_assert_int_eq(heap_push(&h, &v[3]), 0);
    ck_assert_int_eq(heap_push(&h, &v[5]), 0);
    ck_assert_uint_eq(h.len, 2);
    ck_assert_ptr_eq(heap_pop(&h), &v[5]);
    ck_assert_ptr_eq(heap_pop(&h), &v[3]);
    heap_free(&h);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *heap_suite(void) {
    Suite *s = suite_create("heap");
    TCase *tc;

    tc = tcase_create("order");
    tcase_add_test(tc, test_empty);
    tcase_add_loop_test(tc, test_random_pop_order, 10, 11);
    tcase_add_loop_test(tc, test_random_pop_order, 1000, 1001);
    tcase_add_loop_test(tc, test_random_pop_order, 1 << 30, (1 << 30) + 1);
    tcase_add_test(tc, test_large_deadlines);
    tcase_add_test(tc, test_equal_deadlines_fifo);
    tcase_add_test(tc, test_ties_fifo_among_others);
    suite_add_tcase(s, tc);

    tc = tcase_create("remove");
    tcase_add_loop_test(tc, test_remove_positions, 0, REMOVE_CASES);
    tcase_add_test(tc, test_remove_every_position);
    tcase_add_test(tc, test_remove_random_half);
    suite_add_tcase(s, tc);

    tc = tcase_create("repush");
    tcase_add_test(tc, test_repush_moves);
    tcase_add_test(tc, test_repush_same_deadline_goes_last);
    tcase_add_test(tc, test_push_after_pop_and_remove);
    tcase_add_test(tc, test_random_ops_model);
    tcase_add_test(tc, test_free_resets_indexes);
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    SRunner *sr = srunner_create(heap_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
