/* Unit tests of daemon/util/heap: order, FIFO ties, removal, re-push, the tree and its links.
 * SPDX-License-Identifier: MIT */
#include "daemon/util/heap.h"

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Under CK_FORK every ck_assert that passes writes its place to Check's
 * pipe; the checks run per node in hot loops call Check only on failure. */
#define EXPECT(cond, ...)                          \
    do {                                           \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);    \
    } while (0)

/* ---- helpers ------------------------------------------------------------ */

static int node_less(const heap_node_t *a, const heap_node_t *b) {
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

/* Checks the subtree at n, which sits at position pos (root 1, children 2k
 * and 2k+1) under parent; returns its node count. */
static size_t check_subtree(const heap_t *h, const heap_node_t *n, const heap_node_t *parent,
                            size_t pos) {
    if (n == NULL) return 0;
    EXPECT(pos <= h->len, "node at position %zu of a heap of %zu: not complete", pos, h->len);
    EXPECT(n->parent == parent, "position %zu: wrong parent link", pos);
    EXPECT(heap_queued(n), "position %zu: in the tree but not marked queued", pos);
    EXPECT(parent == NULL || node_less(parent, n),
           "heap order broken at %zu: parent (%llu,%llu) child (%llu,%llu)", pos,
           parent ? (unsigned long long)parent->when : 0ull,
           parent ? (unsigned long long)parent->seq : 0ull, (unsigned long long)n->when,
           (unsigned long long)n->seq);
    EXPECT(n->left != NULL || n->right == NULL, "position %zu: right child, no left", pos);
    return 1 + check_subtree(h, n->left, n, 2 * pos) + check_subtree(h, n->right, n, 2 * pos + 1);
}

/* Checks the whole tree: links both ways, order, every position 1..len
 * filled and none past it (so it is complete), every node marked. */
static void check_heap(const heap_t *h) {
    size_t count = check_subtree(h, h->root, NULL, 1);
    EXPECT(count == h->len, "%zu nodes in the tree, len %zu", count, h->len);
}

/* A node out of every heap has no links. */
static void check_out(const heap_node_t *n) {
    EXPECT(!heap_queued(n), "node when=%llu out of the heap but marked queued",
           (unsigned long long)n->when);
    EXPECT(n->parent == NULL && n->left == NULL && n->right == NULL,
           "node when=%llu out of the heap but linked: parent %p left %p right %p",
           (unsigned long long)n->when, (const void *)n->parent, (const void *)n->left,
           (const void *)n->right);
}

/* The node at position pos, walking the bits of pos from the root. */
static heap_node_t *at(const heap_t *h, size_t pos) {
    int depth = 0;
    for (size_t p = pos; p > 1; p >>= 1) depth++;
    heap_node_t *n = h->root;
    while (n != NULL && depth-- > 0) n = (pos >> depth) & 1 ? n->right : n->left;
    ck_assert_ptr_nonnull(n);
    return n;
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
        EXPECT(min == got, "pop %zu: heap_min said %p, heap_pop gave %p", k, (void *)min,
               (void *)got);
        EXPECT(got == want[k].node,
                      "pop %zu: got node when=%llu, want when=%llu (order %zu)", k,
                      got ? (unsigned long long)got->when : 0ull,
                      (unsigned long long)want[k].when, want[k].order);
        check_out(got);
        EXPECT(h->len == n - k - 1, "pop %zu: len %zu, want %zu", k, h->len, n - k - 1);
    }
    ck_assert_ptr_null(heap_min(h));
    ck_assert_ptr_null(heap_pop(h));
    ck_assert_ptr_null(h->root);
}

/* ---- empty -------------------------------------------------------------- */

START_TEST(test_empty) {
    heap_t h;
    heap_node_t n = {.when = 5};

    heap_init(&h);
    ck_assert_ptr_null(heap_min(&h));
    ck_assert_ptr_null(heap_pop(&h));
    ck_assert_uint_eq(h.len, 0);
    check_out(&n);     /* zeroed: not in a heap */
    heap_remove(&h, &n); /* not in it: no-op */
    ck_assert_uint_eq(h.len, 0);
    check_out(&n);

    heap_push(&h, &n);
    ck_assert(heap_queued(&n));
    ck_assert_ptr_eq(h.root, &n);
    ck_assert_uint_eq(h.len, 1);
    check_heap(&h);
    ck_assert_ptr_eq(heap_min(&h), &n);
    ck_assert_ptr_eq(heap_pop(&h), &n);
    check_out(&n);
    ck_assert_ptr_null(heap_min(&h));
    ck_assert_ptr_null(heap_pop(&h));
    heap_clear(&h);
    ck_assert_ptr_null(h.root);
    heap_clear(&h); /* twice is fine */
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
        heap_push(&h, &v[i]);
        ck_assert_uint_eq(h.len, i + 1);
    }
    check_heap(&h);
    qsort(ref, N, sizeof(*ref), cmp_ref);
    pop_all_expect(&h, ref, N);
    heap_clear(&h);
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
        heap_push(&h, &v[i]);
    }
    check_heap(&h);
    qsort(ref, ARRAY_LEN(ref), sizeof(*ref), cmp_ref);
    pop_all_expect(&h, ref, ARRAY_LEN(ref));
    heap_clear(&h);
}
END_TEST

START_TEST(test_equal_deadlines_fifo) {
    enum { N = 1000 };
    heap_node_t *v = make_nodes(N);
    heap_t h;

    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = 42;
        heap_push(&h, &v[i]);
    }
    check_heap(&h);
    for (size_t i = 0; i < N; i++) {
        heap_node_t *got = heap_pop(&h);
        ck_assert_msg(got == &v[i], "pop %zu: got node %td", i, got ? got - v : -1);
    }
    heap_clear(&h);
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
        heap_push(&h, &v[i]);
    }
    for (size_t r = 3; r-- > 0;) {
        for (size_t i = r; i < N; i += 3) {
            heap_node_t *got = heap_pop(&h);
            ck_assert_msg(got == &v[i], "want node %zu, got %td", i, got ? got - v : -1);
        }
    }
    ck_assert_ptr_null(heap_pop(&h));
    heap_clear(&h);
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
        heap_push(h, &v[i]);
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

enum { REMOVE_ROOT, REMOVE_LAST, REMOVE_LEAF, REMOVE_INNER, REMOVE_MIDDLE, REMOVE_CASES };

/* _i picks which tree position to remove: the root (the min), the last
 * node, a leaf that is not the last, an inner node, one half-way. */
START_TEST(test_remove_positions) {
    enum { N = 257 };
    heap_node_t v[N];
    ref_t ref[N];
    heap_t h;
    size_t n = N;

    memset(v, 0, sizeof(v));
    build(&h, v, ref, N, 7);
    check_heap(&h);
    heap_node_t *victim;
    switch (_i) {
    case REMOVE_ROOT:
        victim = h.root;
        ck_assert_ptr_eq(victim, ref[0].node);
        break;
    case REMOVE_LAST:
        victim = at(&h, N);
        break;
    case REMOVE_LEAF: /* the first leaf, N/2 + 1; the last is N */
        victim = at(&h, N / 2 + 1);
        ck_assert_ptr_null(victim->left);
        ck_assert_ptr_ne(victim, at(&h, N));
        break;
    case REMOVE_INNER: /* both children, a parent, and grandchildren */
        victim = at(&h, 5);
        ck_assert_ptr_nonnull(victim->parent);
        ck_assert_ptr_nonnull(victim->right);
        ck_assert_ptr_nonnull(victim->left->left);
        break;
    default:
        victim = at(&h, N / 2);
        break;
    }
    heap_remove(&h, victim);
    check_out(victim);
    ck_assert_uint_eq(h.len, N - 1);
    check_heap(&h);
    n = ref_drop(ref, n, victim);

    /* Removing it again is a no-op. */
    heap_remove(&h, victim);
    check_out(victim);
    ck_assert_uint_eq(h.len, N - 1);
    check_heap(&h);

    pop_all_expect(&h, ref, n);
    heap_clear(&h);
}
END_TEST

START_TEST(test_remove_every_position) {
    /* For every heap size up to 64 and every position in it, remove that
     * position from a fresh heap and check the rest. */
    enum { N = 64 };
    for (size_t size = 1; size <= N; size++) {
        for (size_t pos = 1; pos <= size; pos++) {
            heap_node_t v[N];
            ref_t ref[N];
            heap_t h;

            memset(v, 0, sizeof(v));
            build(&h, v, ref, size, (unsigned)(100 + 64 * size + pos));
            heap_node_t *victim = at(&h, pos);
            heap_remove(&h, victim);
            check_out(victim);
            check_heap(&h);
            size_t n = ref_drop(ref, size, victim);
            pop_all_expect(&h, ref, n);
            heap_clear(&h);
        }
    }
}
END_TEST

START_TEST(test_remove_down_to_empty) {
    /* Removing the last node again and again, then the root again and again,
     * empties the heap with the shape right at each step. */
    enum { N = 100 };
    heap_node_t v[N];
    ref_t ref[N];
    heap_t h;

    memset(v, 0, sizeof(v));
    build(&h, v, ref, N, 11);
    for (size_t len = N; len > N / 2; len--) {
        heap_node_t *last = at(&h, len);
        heap_remove(&h, last);
        check_out(last);
        ck_assert_uint_eq(h.len, len - 1);
        check_heap(&h);
    }
    while (h.len > 0) {
        heap_node_t *root = h.root;
        heap_remove(&h, root);
        check_out(root);
        check_heap(&h);
    }
    ck_assert_ptr_null(h.root);
    for (size_t i = 0; i < N; i++) check_out(&v[i]);
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
            check_out(&v[i]);
            removed[i] = 1;
        }
        if (i % 1000 == 0) check_heap(&h);
    }
    check_heap(&h);
    for (size_t k = 0; k < N; k++)
        if (!removed[ref[k].node - v]) keep[nkeep++] = ref[k];
    pop_all_expect(&h, keep, nkeep);
    heap_clear(&h);
    free(removed);
    free(keep);
    free(ref);
    free(v);
}
END_TEST

START_TEST(test_hundred_thousand) {
    /* 100k nodes: pushed, a third removed from anywhere, the rest popped in
     * order; the tree is checked whole between the phases. */
    enum { N = 100000 };
    heap_node_t *v = make_nodes(N);
    ref_t *ref = malloc(N * sizeof(*ref));
    size_t *perm = malloc(N * sizeof(*perm));
    char *removed = calloc(N, 1);
    heap_t h;

    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(perm);
    ck_assert_ptr_nonnull(removed);
    build(&h, v, ref, N, 5);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);
    for (size_t i = 0; i < N; i++) perm[i] = i;
    srand(6);
    for (size_t i = N - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)rand() % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t k = 0; k < N / 3; k++) {
        heap_remove(&h, &v[perm[k]]);
        check_out(&v[perm[k]]);
        removed[perm[k]] = 1;
    }
    ck_assert_uint_eq(h.len, N - N / 3);
    check_heap(&h);
    size_t n = 0;
    for (size_t k = 0; k < N; k++)
        if (!removed[ref[k].node - v]) ref[n++] = ref[k];
    pop_all_expect(&h, ref, n);
    for (size_t i = 0; i < N; i++) check_out(&v[i]);
    free(removed);
    free(perm);
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
        heap_push(&h, &v[i]);
    }
    /* The last one moves to the front. */
    v[N - 1].when = 1;
    heap_push(&h, &v[N - 1]);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);
    ck_assert_ptr_eq(heap_min(&h), &v[N - 1]);

    /* The front one moves to the back. */
    v[N - 1].when = 1000000;
    heap_push(&h, &v[N - 1]);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);
    ck_assert_ptr_eq(heap_min(&h), &v[0]);

    /* A middle one moves to the front, the min moves to the middle. */
    v[50].when = 0;
    heap_push(&h, &v[50]);
    v[0].when = 1505; /* between v[50] (old 1500) and v[51] (1510) */
    heap_push(&h, &v[0]);
    ck_assert_uint_eq(h.len, N);
    check_heap(&h);

    /* Expected: v[50], v[1..49], v[0], v[51..98], v[99]. */
    ck_assert_ptr_eq(heap_pop(&h), &v[50]);
    for (size_t i = 1; i < 50; i++) ck_assert_ptr_eq(heap_pop(&h), &v[i]);
    ck_assert_ptr_eq(heap_pop(&h), &v[0]);
    for (size_t i = 51; i < N - 1; i++) ck_assert_ptr_eq(heap_pop(&h), &v[i]);
    ck_assert_ptr_eq(heap_pop(&h), &v[N - 1]);
    ck_assert_ptr_null(heap_pop(&h));
    heap_clear(&h);
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
        heap_push(&h, &v[i]);
    }
    heap_push(&h, &v[0]);
    heap_push(&h, &v[2]);
    ck_assert_uint_eq(h.len, 4);
    check_heap(&h);
    ck_assert_ptr_eq(heap_pop(&h), &v[1]);
    ck_assert_ptr_eq(heap_pop(&h), &v[3]);
    ck_assert_ptr_eq(heap_pop(&h), &v[0]);
    ck_assert_ptr_eq(heap_pop(&h), &v[2]);
    ck_assert_ptr_null(heap_pop(&h));
    heap_clear(&h);
}
END_TEST

START_TEST(test_push_after_pop_and_remove) {
    heap_node_t a = {.when = 3}, b = {.when = 2};
    heap_t h;

    heap_init(&h);
    heap_push(&h, &a);
    heap_push(&h, &b);
    ck_assert_ptr_eq(heap_pop(&h), &b);
    check_out(&b);
    heap_remove(&h, &a);
    check_out(&a);
    ck_assert_uint_eq(h.len, 0);
    heap_push(&h, &a);
    heap_push(&h, &b);
    ck_assert_uint_eq(h.len, 2);
    check_heap(&h);
    ck_assert_ptr_eq(heap_pop(&h), &b);
    ck_assert_ptr_eq(heap_pop(&h), &a);
    heap_clear(&h);
}
END_TEST

/* ---- the in-heap flag ---------------------------------------------------- */

START_TEST(test_queued_flag_each_operation) {
    heap_node_t v[8];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < 8; i++) ck_assert(!heap_queued(&v[i]));

    for (size_t i = 0; i < 8; i++) {
        v[i].when = 10 * (8 - i);
        heap_push(&h, &v[i]);
        for (size_t k = 0; k < 8; k++) ck_assert(heap_queued(&v[k]) == (k <= i));
    }
    heap_push(&h, &v[3]); /* re-push */
    ck_assert(heap_queued(&v[3]));
    ck_assert_uint_eq(h.len, 8);

    heap_remove(&h, &v[2]); /* an inner node */
    check_out(&v[2]);
    heap_remove(&h, &v[2]); /* again: still out, nothing else moved */
    check_out(&v[2]);
    ck_assert_uint_eq(h.len, 7);

    heap_node_t *min = heap_pop(&h); /* v[7], when 10 */
    ck_assert_ptr_eq(min, &v[7]);
    check_out(&v[7]);

    for (size_t k = 0; k < 8; k++) ck_assert(heap_queued(&v[k]) == (k != 2 && k != 7));
    check_heap(&h);

    heap_push(&h, &v[2]); /* back in after a removal */
    ck_assert(heap_queued(&v[2]));
    check_heap(&h);

    heap_clear(&h);
    for (size_t k = 0; k < 8; k++) check_out(&v[k]);
    ck_assert_uint_eq(h.len, 0);
}
END_TEST

/* ---- random operations against a reference ------------------------------ */

START_TEST(test_random_ops_model) {
    /* Push, re-push, remove and pop at random. The reference is the test's
     * own: each node's deadline, whether it is in, and its push number;
     * the expected min is a linear scan of it. After every step the heap's
     * length, min and every flag match it; the tree is checked often. */
    enum { N = 300, STEPS = 50000 };
    heap_node_t v[N];
    struct {
        int in;
        uint64_t when;
        uint64_t order;
    } ref[N];
    uint64_t pushes = 0;
    size_t ref_len = 0;
    heap_t h;

    memset(v, 0, sizeof(v));
    memset(ref, 0, sizeof(ref));
    heap_init(&h);
    srand(3);
    for (size_t step = 0; step < STEPS; step++) {
        size_t i = (size_t)rand() % N;
        int op = rand() % 4;
        if (op <= 1) {
            v[i].when = (uint64_t)(rand() % 100);
            heap_push(&h, &v[i]);
            if (!ref[i].in) ref_len++;
            ref[i].in = 1;
            ref[i].when = v[i].when;
            ref[i].order = pushes++;
        } else if (op == 2) {
            heap_remove(&h, &v[i]);
            if (ref[i].in) ref_len--;
            ref[i].in = 0;
        } else {
            heap_node_t *want = NULL;
            size_t w = 0;
            for (size_t k = 0; k < N; k++) {
                if (!ref[k].in) continue;
                if (want == NULL || ref[k].when < ref[w].when ||
                    (ref[k].when == ref[w].when && ref[k].order < ref[w].order)) {
                    want = &v[k];
                    w = k;
                }
            }
            heap_node_t *got = heap_pop(&h);
            EXPECT(got == want, "step %zu: popped node %td, reference min %td", step,
                   got ? got - v : -1, want ? want - v : -1);
            if (want != NULL) {
                ref[w].in = 0;
                ref_len--;
            }
        }
        EXPECT(h.len == ref_len, "step %zu: len %zu, reference %zu", step, h.len, ref_len);
        for (size_t k = 0; k < N; k++)
            EXPECT(heap_queued(&v[k]) == (ref[k].in != 0),
                          "step %zu: node %zu flag %d, reference %d", step, k,
                          (int)heap_queued(&v[k]), ref[k].in);
        if (step % 97 == 0) check_heap(&h);
    }
    check_heap(&h);
    heap_clear(&h);
    for (size_t k = 0; k < N; k++) check_out(&v[k]);
}
END_TEST

/* ---- heap_clear --------------------------------------------------------- */

START_TEST(test_clear_marks_nodes_out) {
    enum { N = 200 };
    heap_node_t v[N];
    heap_t h;

    memset(v, 0, sizeof(v));
    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        v[i].when = (uint64_t)(N - i);
        heap_push(&h, &v[i]);
    }
    ck_assert_ptr_eq(heap_pop(&h), &v[N - 1]);
    heap_clear(&h);
    for (size_t i = 0; i < N; i++) check_out(&v[i]);
    ck_assert_ptr_null(h.root);
    ck_assert_uint_eq(h.len, 0);
    ck_assert_ptr_null(heap_min(&h));

    /* The heap and the nodes can be used again. */
    heap_push(&h, &v[3]);
    heap_push(&h, &v[5]);
    ck_assert_uint_eq(h.len, 2);
    check_heap(&h);
    ck_assert_ptr_eq(heap_pop(&h), &v[5]);
    ck_assert_ptr_eq(heap_pop(&h), &v[3]);
    heap_clear(&h);
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
    tcase_add_test(tc, test_remove_down_to_empty);
    tcase_add_test(tc, test_remove_random_half);
    tcase_add_test(tc, test_hundred_thousand);
    suite_add_tcase(s, tc);

    tc = tcase_create("repush");
    tcase_add_test(tc, test_repush_moves);
    tcase_add_test(tc, test_repush_same_deadline_goes_last);
    tcase_add_test(tc, test_push_after_pop_and_remove);
    tcase_add_test(tc, test_queued_flag_each_operation);
    tcase_add_test(tc, test_random_ops_model);
    tcase_add_test(tc, test_clear_marks_nodes_out);
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
