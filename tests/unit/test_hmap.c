/* Unit tests of daemon/util/hmap: put/get/del, growth, binary keys, chains and iteration.
 * SPDX-License-Identifier: MIT */
#include "daemon/util/hmap.h"

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- entries ------------------------------------------------------------ */

#define NAME_LEN 24

/* An entry embedding its node, as the daemon's users do. */
typedef struct entry_s {
    hmap_node_t node;
    int visits;            /* times iteration reached this entry */
    char name[NAME_LEN];   /* the key's bytes */
} entry_t;

static entry_t *entry_of(hmap_node_t *n) {
    return (entry_t *)((char *)n - offsetof(entry_t, node));
}

/* Names entries "key-<i>" and points each node's key at its name. */
static entry_t *make_entries(size_t n) {
    entry_t *e = calloc(n, sizeof(*e));
    ck_assert_ptr_nonnull(e);
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(e[i].name, sizeof(e[i].name), "key-%zu", i);
        ck_assert_int_gt(w, 0);
        e[i].node.key = e[i].name;
        e[i].node.len = (size_t)w;
    }
    return e;
}

/* Looks a key up through a private copy, so a match cannot be by pointer. */
static hmap_node_t *get_copy(const hmap_t *m, const char *key, size_t len) {
    char *copy = malloc(len + 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, key, len);
    copy[len] = 'X'; /* a byte past the key that must not matter */
    hmap_node_t *n = hmap_get(m, copy, len);
    free(copy);
    return n;
}

/* Counts the nodes iteration yields, checking none is yielded twice. */
static size_t count_by_iteration(const hmap_t *m) {
    size_t i = 0, seen = 0;
    for (hmap_node_t *n = hmap_next(m, &i, NULL); n; n = hmap_next(m, &i, n)) {
        entry_t *e = entry_of(n);
        ck_assert_int_eq(e->visits, 0);
        e->visits++;
        seen++;
    }
    return seen;
}

/* Finds n keys "c-<j>" whose hashes share the same bucket in a map of
 * nbuckets buckets. Names go in names[], NAME_LEN bytes each. */
static void colliding_names(size_t nbuckets, size_t n, char names[][NAME_LEN]) {
    for (size_t want = 0; want < nbuckets; want++) {
        size_t found = 0;
        for (size_t j = 0; j < 100000 && found < n; j++) {
            char buf[NAME_LEN];
            int w = snprintf(buf, sizeof(buf), "c-%zu", j);
            if ((hmap_hash(buf, (size_t)w) & (nbuckets - 1)) == want)
                memcpy(names[found++], buf, sizeof(buf));
        }
        if (found == n) return;
    }
    ck_abort_msg("no %zu colliding names found", n);
}

/* ---- basics ------------------------------------------------------------- */

START_TEST(test_init_and_free) {
    hmap_t m;

    ck_assert_int_eq(hmap_init(&m), 0);
    ck_assert_ptr_nonnull(m.buckets);
    ck_assert_uint_eq(m.nbuckets, HMAP_MIN_BUCKETS);
    ck_assert_uint_eq(m.count, 0);
    ck_assert_ptr_null(hmap_get(&m, "a", 1));
    ck_assert_ptr_null(hmap_get(&m, "", 0));
    hmap_free(&m);
    ck_assert_ptr_null(m.buckets);
    ck_assert_uint_eq(m.nbuckets, 0);
    ck_assert_uint_eq(m.count, 0);
}
END_TEST

START_TEST(test_put_get_del_one) {
    hmap_t m;
    entry_t e = {.name = "alpha"};
    e.node.key = e.name;
    e.node.len = 5;

    ck_assert_int_eq(hmap_init(&m), 0);
    hmap_put(&m, &e.node);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_uint_eq(e.node.hash, hmap_hash("alpha", 5));
    ck_assert_ptr_eq(hmap_get(&m, "alpha", 5), &e.node);
    ck_assert_ptr_eq(get_copy(&m, "alpha", 5), &e.node);
    ck_assert_ptr_null(hmap_get(&m, "alphb", 5));
    ck_assert_ptr_null(hmap_get(&m, "alph", 4));
    ck_assert_ptr_null(hmap_get(&m, "Alpha", 5));
    hmap_del(&m, &e.node);
    ck_assert_uint_eq(m.count, 0);
    ck_assert_ptr_null(hmap_get(&m, "alpha", 5));
    /* It can go back in after being deleted. */
    hmap_put(&m, &e.node);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_ptr_eq(hmap_get(&m, "alpha", 5), &e.node);
    hmap_free(&m);
}
END_TEST

START_TEST(test_get_missing) {
    hmap_t m;
    entry_t *e = make_entries(1000);

    ck_assert_int_eq(hmap_init(&m), 0);
    ck_assert_ptr_null(hmap_get(&m, "key-0", 5));
    for (size_t i = 0; i < 1000; i++) hmap_put(&m, &e[i].node);
    ck_assert_ptr_null(hmap_get(&m, "key-1000", 8));
    ck_assert_ptr_null(hmap_get(&m, "key-", 4));
    ck_assert_ptr_null(hmap_get(&m, "", 0));
    ck_assert_ptr_null(hmap_get(&m, "key-0\0", 6));
    ck_assert_ptr_null(hmap_get(&m, "KEY-0", 5));
    ck_assert_ptr_null(hmap_get(&m, "nothing", 7));
    ck_assert_uint_eq(m.count, 1000);
    hmap_free(&m);
    free(e);
}
END_TEST

/* ---- many keys and growth ----------------------------------------------- */

#define MANY 100000

START_TEST(test_many_keys_grow) {
    hmap_t m;
    entry_t *e = make_entries(MANY);
    size_t last_nbuckets = HMAP_MIN_BUCKETS;

    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t i = 0; i < MANY; i++) {
        hmap_put(&m, &e[i].node);
        ck_assert_uint_eq(m.count, i + 1);
        /* Buckets stay a power of two and never shrink. */
        ck_assert_uint_ge(m.nbuckets, last_nbuckets);
        ck_assert_uint_eq(m.nbuckets & (m.nbuckets - 1), 0);
        last_nbuckets = m.nbuckets;
        /* Spot-check that growth keeps earlier keys findable. */
        if ((i & (i + 1)) == 0) {
            for (size_t j = 0; j <= i; j++)
                ck_assert_ptr_eq(hmap_get(&m, e[j].name, e[j].node.len), &e[j].node);
        }
    }
    ck_assert_uint_ge(m.nbuckets, MANY / 2);
    for (size_t i = 0; i < MANY; i++)
        ck_assert_ptr_eq(get_copy(&m, e[i].name, e[i].node.len), &e[i].node);
    ck_assert_uint_eq(count_by_iteration(&m), MANY);

    /* Delete the even ones; the odd ones stay findable. */
    for (size_t i = 0; i < MANY; i += 2) hmap_del(&m, &e[i].node);
    ck_assert_uint_eq(m.count, MANY / 2);
    for (size_t i = 0; i < MANY; i++) {
        hmap_node_t *n = hmap_get(&m, e[i].name, e[i].node.len);
        if (i % 2) ck_assert_ptr_eq(n, &e[i].node);
        else ck_assert_ptr_null(n);
    }
    /* Then the rest. */
    for (size_t i = 1; i < MANY; i += 2) hmap_del(&m, &e[i].node);
    ck_assert_uint_eq(m.count, 0);
    for (size_t i = 0; i < MANY; i++) ck_assert_ptr_null(hmap_get(&m, e[i].name, e[i].node.len));
    size_t it = 0;
    ck_assert_ptr_null(hmap_next(&m, &it, NULL));
    hmap_free(&m);
    free(e);
}
END_TEST

/* A reserve makes the buckets at once, keeps what is in the map findable,
 * and the puts up to it grow nothing; a smaller one changes nothing. */
START_TEST(test_reserve) {
    hmap_t m;
    entry_t *e = make_entries(MANY);
    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t i = 0; i < 10; i++) hmap_put(&m, &e[i].node);
    ck_assert_int_eq(hmap_reserve(&m, MANY), 0);
    size_t nb = m.nbuckets;
    ck_assert_uint_ge(nb, MANY);
    ck_assert_uint_eq(nb & (nb - 1), 0);
    for (size_t i = 0; i < 10; i++)
        ck_assert_ptr_eq(hmap_get(&m, e[i].name, e[i].node.len), &e[i].node);
    for (size_t i = 10; i < MANY; i++) hmap_put(&m, &e[i].node);
    ck_assert_uint_eq(m.nbuckets, nb);
    ck_assert_int_eq(hmap_reserve(&m, 5), 0);
    ck_assert_uint_eq(m.nbuckets, nb);
    for (size_t i = 0; i < MANY; i++)
        ck_assert_ptr_eq(hmap_get(&m, e[i].name, e[i].node.len), &e[i].node);
    hmap_free(&m);
    free(e);
}
END_TEST

/* ---- key shapes --------------------------------------------------------- */

START_TEST(test_lengths_and_prefixes) {
    static const char *const keys[] = {
        "", "a", "aa", "aaa", "aaaa", "ab", "abc", "abcd", "b", "ba", "lock", "lock.",
        "lock.1", "lock.12", "lock.123", "lock.1234", "lock.2", "job", "job.42", "job.4",
    };
    entry_t e[ARRAY_LEN(keys)];
    hmap_t m;

    memset(e, 0, sizeof(e));
    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        e[i].node.key = keys[i];
        e[i].node.len = strlen(keys[i]);
        hmap_put(&m, &e[i].node);
    }
    ck_assert_uint_eq(m.count, ARRAY_LEN(keys));
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        hmap_node_t *n = get_copy(&m, keys[i], strlen(keys[i]));
        ck_assert_msg(n == &e[i].node, "key \"%s\": got %p, want %p", keys[i], (void *)n,
                      (void *)&e[i].node);
    }
    /* A key is found only with its own length, not a prefix of the bytes. */
    ck_assert_ptr_eq(hmap_get(&m, "lock.1234", 6), &e[12].node);
    ck_assert_ptr_eq(hmap_get(&m, "lock.1234", 4), &e[10].node);
    ck_assert_ptr_eq(hmap_get(&m, "aaaa", 0), &e[0].node);
    ck_assert_ptr_null(hmap_get(&m, "lock.12345", 10));
    ck_assert_ptr_null(hmap_get(&m, "job.", 4));

    /* Deleting a prefix leaves the longer keys. */
    hmap_del(&m, &e[1].node);  /* "a" */
    hmap_del(&m, &e[10].node); /* "lock" */
    ck_assert_ptr_null(hmap_get(&m, "a", 1));
    ck_assert_ptr_null(hmap_get(&m, "lock", 4));
    ck_assert_ptr_eq(hmap_get(&m, "aa", 2), &e[2].node);
    ck_assert_ptr_eq(hmap_get(&m, "lock.", 5), &e[11].node);
    ck_assert_ptr_eq(hmap_get(&m, "", 0), &e[0].node);
    ck_assert_uint_eq(m.count, ARRAY_LEN(keys) - 2);
    hmap_free(&m);
}
END_TEST

START_TEST(test_binary_keys_with_nul) {
    static const struct {
        const char *bytes;
        size_t len;
    } keys[] = {
        {"\0", 1},     {"\0\0", 2},  {"\0\0\0", 3}, {"a", 1},       {"a\0", 2},
        {"a\0b", 3},   {"a\0c", 3},  {"\0a", 2},    {"a\0\0b", 4},  {"\xff\0\x01", 3},
        {"\x01", 1},   {"\x80", 1},  {"a\0b\0", 4}, {"", 0},
    };
    entry_t e[ARRAY_LEN(keys)];
    hmap_t m;

    memset(e, 0, sizeof(e));
    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        e[i].node.key = keys[i].bytes;
        e[i].node.len = keys[i].len;
        hmap_put(&m, &e[i].node);
    }
    ck_assert_uint_eq(m.count, ARRAY_LEN(keys));
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        hmap_node_t *n = get_copy(&m, keys[i].bytes, keys[i].len);
        ck_assert_msg(n == &e[i].node, "binary key %zu (len %zu): got %p, want %p", i,
                      keys[i].len, (void *)n, (void *)&e[i].node);
    }
    ck_assert_ptr_null(hmap_get(&m, "a\0d", 3));
    ck_assert_ptr_null(hmap_get(&m, "\0\0\0\0", 4));
    ck_assert_ptr_null(hmap_get(&m, "b\0", 2));
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        hmap_del(&m, &e[i].node);
        ck_assert_ptr_null(hmap_get(&m, keys[i].bytes, keys[i].len));
        for (size_t j = i + 1; j < ARRAY_LEN(keys); j++)
            ck_assert_ptr_eq(hmap_get(&m, keys[j].bytes, keys[j].len), &e[j].node);
    }
    ck_assert_uint_eq(m.count, 0);
    hmap_free(&m);
}
END_TEST

/* ---- bucket chains ------------------------------------------------------ */

#define CHAIN 3

/* Puts CHAIN colliding keys in a fresh map (no growth happens) and checks the
 * chain: heads are the most recent put, so the order is e[2], e[1], e[0]. */
static void make_chain(hmap_t *m, entry_t *e, char names[][NAME_LEN], size_t *bucket) {
    colliding_names(HMAP_MIN_BUCKETS, CHAIN, names);
    ck_assert_int_eq(hmap_init(m), 0);
    memset(e, 0, CHAIN * sizeof(*e));
    for (size_t i = 0; i < CHAIN; i++) {
        e[i].node.key = names[i];
        e[i].node.len = strlen(names[i]);
        hmap_put(m, &e[i].node);
    }
    ck_assert_uint_eq(m->nbuckets, HMAP_MIN_BUCKETS);
    *bucket = e[0].node.hash & (m->nbuckets - 1);
    size_t len = 0;
    for (hmap_node_t *n = m->buckets[*bucket]; n; n = n->next) len++;
    ck_assert_uint_eq(len, CHAIN);
}

/* Checks that exactly the entries not in gone[] are in the map and chain. */
static void check_chain(const hmap_t *m, entry_t *e, size_t bucket, const int *gone) {
    size_t want = 0, len = 0;
    for (size_t i = 0; i < CHAIN; i++) {
        hmap_node_t *n = hmap_get(m, e[i].node.key, e[i].node.len);
        if (gone[i]) {
            ck_assert_ptr_null(n);
        } else {
            ck_assert_ptr_eq(n, &e[i].node);
            want++;
        }
    }
    for (hmap_node_t *n = m->buckets[bucket]; n; n = n->next) len++;
    ck_assert_uint_eq(len, want);
    ck_assert_uint_eq(m->count, want);
}

/* _i picks which position of the chain goes first: 0 head, 1 middle, 2 tail. */
START_TEST(test_del_in_chain) {
    static const size_t entry_at[CHAIN] = {2, 1, 0}; /* chain position -> entry */
    char names[CHAIN][NAME_LEN];
    entry_t e[CHAIN];
    hmap_t m;
    size_t bucket;
    int gone[CHAIN] = {0};

    make_chain(&m, e, names, &bucket);
    ck_assert_ptr_eq(m.buckets[bucket], &e[2].node);
    ck_assert_ptr_eq(m.buckets[bucket]->next, &e[1].node);
    ck_assert_ptr_eq(m.buckets[bucket]->next->next, &e[0].node);

    size_t first = entry_at[_i];
    hmap_del(&m, &e[first].node);
    gone[first] = 1;
    ck_assert_ptr_null(e[first].node.next);
    check_chain(&m, e, bucket, gone);

    /* Then the other two, one at a time. */
    for (size_t k = 0; k < CHAIN; k++) {
        if (gone[k]) continue;
        hmap_del(&m, &e[k].node);
        gone[k] = 1;
        check_chain(&m, e, bucket, gone);
    }
    ck_assert_ptr_null(m.buckets[bucket]);
    hmap_free(&m);
}
END_TEST

START_TEST(test_chain_survives_growth) {
    /* Many keys sharing the low 4 bits of their hash, so they share a chain
     * at first; growth must spread them without losing any. */
    enum { N = 64 };
    char names[N][NAME_LEN];
    entry_t e[N];
    hmap_t m;

    colliding_names(HMAP_MIN_BUCKETS, N, names);
    memset(e, 0, sizeof(e));
    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t i = 0; i < N; i++) {
        e[i].node.key = names[i];
        e[i].node.len = strlen(names[i]);
        hmap_put(&m, &e[i].node);
        for (size_t j = 0; j <= i; j++)
            ck_assert_ptr_eq(hmap_get(&m, names[j], strlen(names[j])), &e[j].node);
    }
    ck_assert_uint_eq(m.count, N);
    ck_assert_uint_gt(m.nbuckets, HMAP_MIN_BUCKETS);
    ck_assert_uint_eq(count_by_iteration(&m), N);
    hmap_free(&m);
}
END_TEST

/* ---- iteration ---------------------------------------------------------- */

START_TEST(test_iterate_empty) {
    hmap_t m;
    size_t i = 0;

    ck_assert_int_eq(hmap_init(&m), 0);
    ck_assert_ptr_null(hmap_next(&m, &i, NULL));
    hmap_free(&m);
}
END_TEST

/* _i is the number of entries. */
START_TEST(test_iterate_visits_each_once) {
    size_t n = (size_t)_i;
    entry_t *e = make_entries(n);
    hmap_t m;

    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t k = 0; k < n; k++) hmap_put(&m, &e[k].node);
    ck_assert_uint_eq(count_by_iteration(&m), n);
    for (size_t k = 0; k < n; k++) ck_assert_int_eq(e[k].visits, 1);
    hmap_free(&m);
    free(e);
}
END_TEST

/* Deletes every node while iterating, fetching the next one first. */
START_TEST(test_iterate_delete_all) {
    size_t n = (size_t)_i;
    entry_t *e = make_entries(n);
    hmap_t m;
    size_t i = 0, seen = 0;

    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t k = 0; k < n; k++) hmap_put(&m, &e[k].node);
    hmap_node_t *node = hmap_next(&m, &i, NULL);
    while (node) {
        hmap_node_t *next = hmap_next(&m, &i, node);
        entry_t *en = entry_of(node);
        ck_assert_int_eq(en->visits, 0);
        en->visits++;
        seen++;
        hmap_del(&m, node);
        ck_assert_ptr_null(hmap_get(&m, en->name, en->node.len));
        node = next;
    }
    ck_assert_uint_eq(seen, n);
    ck_assert_uint_eq(m.count, 0);
    for (size_t k = 0; k < n; k++) ck_assert_int_eq(e[k].visits, 1);
    for (size_t b = 0; b < m.nbuckets; b++) ck_assert_ptr_null(m.buckets[b]);
    hmap_free(&m);
    free(e);
}
END_TEST

/* Deletes every third node while iterating; the rest stay, each seen once. */
START_TEST(test_iterate_delete_some) {
    enum { N = 5000 };
    entry_t *e = make_entries(N);
    hmap_t m;
    size_t i = 0, seen = 0, deleted = 0;

    ck_assert_int_eq(hmap_init(&m), 0);
    for (size_t k = 0; k < N; k++) hmap_put(&m, &e[k].node);
    hmap_node_t *node = hmap_next(&m, &i, NULL);
    while (node) {
        hmap_node_t *next = hmap_next(&m, &i, node);
        entry_t *en = entry_of(node);
        ck_assert_int_eq(en->visits, 0);
        en->visits++;
        seen++;
        if ((size_t)(en - e) % 3 == 0) {
            hmap_del(&m, node);
            deleted++;
        }
        node = next;
    }
    ck_assert_uint_eq(seen, N);
    ck_assert_uint_eq(deleted, (N + 2) / 3);
    ck_assert_uint_eq(m.count, N - deleted);
    for (size_t k = 0; k < N; k++) {
        hmap_node_t *n = hmap_get(&m, e[k].name, e[k].node.len);
        if (k % 3 == 0) ck_assert_ptr_null(n);
        else ck_assert_ptr_eq(n, &e[k].node);
        e[k].visits = 0;
    }
    ck_assert_uint_eq(count_by_iteration(&m), N - deleted);
    hmap_free(&m);
    free(e);
}
END_TEST

/* ---- hashing ------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_hash_stable) {
    char a[] = "lock.name";
    char b[] = "lock.name";

    ck_assert_uint_eq(hmap_hash(a, 9), hmap_hash(b, 9));
    ck_assert_uint_eq(hmap_hash(a, 9), hmap_hash(a, 9));
    ck_assert_uint_eq(hmap_hash("", 0), hmap_hash(NULL, 0));
    ck_assert_uint_eq(hmap_hash("a\0b", 3), hmap_hash("a\0bzz", 3));
    /* Length and NUL bytes count. */
    ck_assert_uint_ne(hmap_hash("a", 1), hmap_hash("a\0", 2));
    ck_assert_uint_ne(hmap_hash("", 0), hmap_hash("\0", 1));
    ck_assert_uint_ne(hmap_hash("a\0b", 3), hmap_hash("a\0c", 3));
    ck_assert_uint_ne(hmap_hash("ab", 2), hmap_hash("ba", 2));
}
END_TEST

START_TEST(test_hash_spreads) {
    enum { N = 100000, SMALL = 16 * 1024 };
    uint64_t *h = malloc(N * sizeof(*h));
    size_t buckets[16] = {0};

    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < N; i++) {
        char buf[NAME_LEN];
        int w = snprintf(buf, sizeof(buf), "key-%zu", i);
        h[i] = hmap_hash(buf, (size_t)w);
        if (i < SMALL) buckets[h[i] & 15]++;
    }
    /* No two of 100000 names share a 64-bit hash. */
    qsort(h, N, sizeof(*h), cmp_u64);
    size_t dups = 0;
    for (size_t i = 1; i < N; i++)
        if (h[i] == h[i - 1]) dups++;
    ck_assert_uint_eq(dups, 0);
    /* Low bits (which pick buckets) spread: each of 16 buckets gets 1/16 of
     * the sequential names within a loose margin. */
    for (size_t b = 0; b < 16; b++) {
        ck_assert_uint_gt(buckets[b], SMALL / 16 / 2);
        ck_assert_uint_lt(buckets[b], SMALL / 16 * 2);
    }
    free(h);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *hmap_suite(void) {
    Suite *s = suite_create("hmap");
    TCase *tc;

    tc = tcase_create("basics");
    tcase_add_test(tc, test_init_and_free);
    tcase_add_test(tc, test_put_get_del_one);
    tcase_add_test(tc, test_reserve);
    tcase_add_test(tc, test_get_missing);
    tcase_add_test(tc, test_lengths_and_prefixes);
    tcase_add_test(tc, test_binary_keys_with_nul);
    suite_add_tcase(s, tc);

    tc = tcase_create("growth");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_many_keys_grow);
    tcase_add_test(tc, test_chain_survives_growth);
    suite_add_tcase(s, tc);

    tc = tcase_create("chains");
    tcase_add_loop_test(tc, test_del_in_chain, 0, CHAIN);
    suite_add_tcase(s, tc);

    tc = tcase_create("iteration");
    tcase_add_test(tc, test_iterate_empty);
    tcase_add_loop_test(tc, test_iterate_visits_each_once, 1, 2);
    tcase_add_loop_test(tc, test_iterate_visits_each_once, 16, 18);
    tcase_add_loop_test(tc, test_iterate_visits_each_once, 1000, 1001);
    tcase_add_loop_test(tc, test_iterate_delete_all, 1, 2);
    tcase_add_loop_test(tc, test_iterate_delete_all, 17, 18);
    tcase_add_loop_test(tc, test_iterate_delete_all, 10000, 10001);
    tcase_add_test(tc, test_iterate_delete_some);
    suite_add_tcase(s, tc);

    tc = tcase_create("hash");
    tcase_add_test(tc, test_hash_stable);
    tcase_add_test(tc, test_hash_spreads);
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    SRunner *sr = srunner_create(hmap_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
