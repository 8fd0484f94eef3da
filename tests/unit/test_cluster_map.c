/* Unit tests of daemon/backend/cluster_map: SHARDS and SLOTS replies, slot lookup, MOVED/ASK.
 * SPDX-License-Identifier: MIT
 *
 * Replies are written in a short notation, turned into RESP2 bytes and
 * read with hiredis's reader, as the daemon reads them:
 *   [ ... ]  an array (a RESP2 map is a flat array of name, value pairs)
 *   "text"   a bulk string (no '"' inside)
 *   :123     an integer */
#include <check.h>
#include <ctype.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/cluster_map.h"

/* ---- replies from the notation ------------------------------------------- */

static void skip_space(const char **p) {
    while (isspace((unsigned char)**p)) (*p)++;
}

/* Elements of the array whose '[' was just passed, at *p. */
static size_t count_elements(const char *p) {
    size_t n = 0;
    int depth = 0, in_str = 0;
    for (; *p != '\0'; p++) {
        if (in_str) {
            in_str = *p != '"';
            continue;
        }
        if (*p == ']' && depth-- == 0) return n;
        if (depth == 0 && (*p == '[' || *p == '"' || *p == ':')) n++;
        if (*p == '[') depth++;
        if (*p == '"') in_str = 1;
    }
    ck_abort_msg("an array without its ']'");
    return 0;
}

static void emit(const char **p, FILE *out) {
    skip_space(p);
    if (**p == '[') {
        (*p)++;
        fprintf(out, "*%zu\r\n", count_elements(*p));
        for (skip_space(p); **p != ']'; skip_space(p)) emit(p, out);
        (*p)++;
    } else if (**p == '"') {
        const char *end = strchr(*p + 1, '"');
        ck_assert_ptr_nonnull(end);
        fprintf(out, "$%zu\r\n%.*s\r\n", (size_t)(end - *p - 1), (int)(end - *p - 1), *p + 1);
        *p = end + 1;
    } else if (**p == ':') {
        size_t n = strcspn(*p, " \t\n]");
        fprintf(out, "%.*s\r\n", (int)n, *p);
        *p += n;
    } else {
        ck_abort_msg("bad notation at: %s", *p);
    }
}

static redisReply *reply_of(const char *notation) {
    char *bytes = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&bytes, &len);
    ck_assert_ptr_nonnull(f);
    const char *p = notation;
    emit(&p, f);
    fclose(f);
    skip_space(&p);
    ck_assert_msg(*p == '\0', "left over: %s", p);
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    ck_assert_int_eq(redisReaderFeed(rd, bytes, len), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    ck_assert_ptr_nonnull(r);
    redisReaderFree(rd);
    free(bytes);
    return r;
}

static cluster_map_t map; /* 32 kB: not on the stack */
static char err[CLUSTER_MAP_ERR_LEN];

static int shards(const char *notation, const char *asked, int tls) {
    redisReply *r = reply_of(notation);
    err[0] = '\0';
    int rc = cluster_map_shards(&map, r, asked, tls, err, sizeof(err));
    freeReplyObject(r);
    return rc;
}

static int slots(const char *notation, const char *asked) {
    redisReply *r = reply_of(notation);
    err[0] = '\0';
    int rc = cluster_map_slots(&map, r, asked, err, sizeof(err));
    freeReplyObject(r);
    return rc;
}

/* The address slot's owner has in map, "host:port", or "none". */
static const char *owner_of(unsigned slot) {
    static char buf[CLUSTER_MAP_HOST_MAX + 16];
    int i = cluster_map_owner(&map, slot);
    if (i < 0) return "none";
    ck_assert_uint_lt((size_t)i, map.n);
    snprintf(buf, sizeof(buf), "%s:%d", map.addr[i].host, map.addr[i].port);
    return buf;
}

#define ERR_HAS(s) ck_assert_msg(strstr(err, (s)) != NULL, "error \"%s\" lacks \"%s\"", err, (s))

/* A node of CLUSTER SHARDS, as Redis 7 writes it. */
#define NODE(id, ip, endpoint, port, role, health)                                        \
    "[\"id\" \"" id "\" \"port\" :" #port " \"ip\" \"" ip "\" \"endpoint\" \"" endpoint    \
    "\" \"role\" \"" role "\" \"replication-offset\" :72156 \"health\" \"" health "\"]"

/* ---- CLUSTER SHARDS -------------------------------------------------------- */

START_TEST(shards_of_three_primaries_with_replicas) {
    const char *r =
        "["
        " [\"slots\" [:0 :5460] \"nodes\" ["
        NODE("a1", "10.0.0.1", "10.0.0.1", 7000, "master", "online")
        NODE("a2", "10.0.0.4", "10.0.0.4", 7003, "replica", "online") "]]"
        " [\"slots\" [:5461 :10922] \"nodes\" ["
        NODE("b2", "10.0.0.5", "10.0.0.5", 7004, "replica", "online") /* a replica first */
        NODE("b1", "10.0.0.2", "10.0.0.2", 7001, "master", "online") "]]"
        " [\"slots\" [:10923 :16383] \"nodes\" ["
        NODE("c1", "10.0.0.3", "10.0.0.3", 7002, "master", "online")
        NODE("c2", "10.0.0.6", "10.0.0.6", 7005, "replica", "online") "]]"
        "]";
    ck_assert_int_eq(shards(r, "10.0.0.9", 0), 0);
    ck_assert_uint_eq(map.n, 3);
    ck_assert_uint_eq(cluster_map_covered(&map), KEYS_SLOTS);
    ck_assert_str_eq(owner_of(0), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(5460), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(5461), "10.0.0.2:7001");
    ck_assert_str_eq(owner_of(10922), "10.0.0.2:7001");
    ck_assert_str_eq(owner_of(10923), "10.0.0.3:7002");
    ck_assert_str_eq(owner_of(16383), "10.0.0.3:7002");
    ck_assert_int_eq(cluster_map_owner(&map, KEYS_SLOTS), -1);
}
END_TEST

START_TEST(shards_read_again_forget_the_last_map) {
    ck_assert_int_eq(shards("[[\"slots\" [:0 :16383] \"nodes\" ["
                            NODE("a", "10.0.0.1", "", 7000, "master", "online") "]]]",
                            "x", 0), 0);
    ck_assert_int_eq(shards("[[\"slots\" [:0 :99] \"nodes\" ["
                            NODE("b", "10.0.0.2", "", 7001, "master", "online") "]]]",
                            "x", 0), 0);
    ck_assert_uint_eq(map.n, 1);
    ck_assert_str_eq(owner_of(0), "10.0.0.2:7001");
    ck_assert_str_eq(owner_of(100), "none");
    ck_assert_uint_eq(cluster_map_covered(&map), 100);
}
END_TEST

START_TEST(shards_endpoint_hostname_ip_and_the_node_asked) {
    const char *r =
        "["
        " [\"slots\" [:0 :99] \"nodes\" ["
        NODE("a", "10.0.0.1", "redis-a.example", 7000, "master", "online") "]]"
        " [\"slots\" [:100 :199] \"nodes\" ["
        NODE("b", "10.0.0.2", "?", 7001, "master", "online") "]]"
        " [\"slots\" [:200 :299] \"nodes\" ["
        NODE("c", "10.0.0.3", "", 7002, "master", "online") "]]"
        " [\"slots\" [:300 :399] \"nodes\" ["
        NODE("d", "", "", 7003, "master", "online") "]]"
        " [\"slots\" [:400 :499] \"nodes\" ["
        NODE("e", "?", "?", 7004, "master", "online") "]]"
        " [\"slots\" [:500 :599] \"nodes\" ["
        /* no endpoint */
        "  [\"id\" \"f\" \"port\" :7005 \"ip\" \"10.0.0.6\" \"role\" \"master\"]]]"
        "]";
    ck_assert_int_eq(shards(r, "seed.example", 0), 0);
    ck_assert_uint_eq(map.n, 6);
    ck_assert_str_eq(owner_of(0), "redis-a.example:7000");
    ck_assert_str_eq(owner_of(100), "10.0.0.2:7001");
    ck_assert_str_eq(owner_of(200), "10.0.0.3:7002");
    ck_assert_str_eq(owner_of(300), "seed.example:7003");
    ck_assert_str_eq(owner_of(400), "seed.example:7004");
    ck_assert_str_eq(owner_of(500), "10.0.0.6:7005");
    ck_assert_str_eq(owner_of(600), "none");
}
END_TEST

START_TEST(shards_tls_port) {
    const char *r =
        "["
        " [\"slots\" [:0 :99] \"nodes\" ["
        "  [\"id\" \"a\" \"port\" :7000 \"tls-port\" :8000 \"ip\" \"h\" \"role\" \"master\"]]]"
        " [\"slots\" [:100 :199] \"nodes\" [" /* TLS only: no port */
        "  [\"id\" \"b\" \"tls-port\" :8001 \"ip\" \"h\" \"role\" \"master\"]]]"
        " [\"slots\" [:200 :299] \"nodes\" [" /* no tls-port: its port */
        "  [\"id\" \"c\" \"port\" :7002 \"ip\" \"h\" \"role\" \"master\"]]]"
        " [\"slots\" [:300 :399] \"nodes\" [" /* tls-port 0: its port */
        "  [\"id\" \"d\" \"port\" :7003 \"tls-port\" :0 \"ip\" \"h\" \"role\" \"master\"]]]"
        "]";
    ck_assert_int_eq(shards(r, "h", 1), 0);
    ck_assert_str_eq(owner_of(0), "h:8000");
    ck_assert_str_eq(owner_of(100), "h:8001");
    ck_assert_str_eq(owner_of(200), "h:7002");
    ck_assert_str_eq(owner_of(300), "h:7003");

    /* Without TLS the port, whatever tls-port says; a node with none fails. */
    ck_assert_int_eq(shards(r, "h", 0), -1);
    ERR_HAS("shard 1 node 0");
    ERR_HAS("port");
}
END_TEST

START_TEST(shards_failed_and_loading_nodes) {
    const char *r =
        "["
        /* A primary that failed and was not replaced yet: still the owner
         * (its node finds out it is down). */
        " [\"slots\" [:0 :99] \"nodes\" ["
        NODE("a", "10.0.0.1", "10.0.0.1", 7000, "master", "failed")
        NODE("a2", "10.0.0.4", "10.0.0.4", 7003, "replica", "online") "]]"
        /* Its replica took over: the old one is a failed replica now. */
        " [\"slots\" [:100 :199] \"nodes\" ["
        NODE("b", "10.0.0.2", "10.0.0.2", 7001, "replica", "failed")
        NODE("b2", "10.0.0.5", "10.0.0.5", 7004, "master", "online") "]]"
        /* No primary at all (a loading replica only): the slots stay unknown. */
        " [\"slots\" [:200 :299] \"nodes\" ["
        NODE("c2", "10.0.0.6", "10.0.0.6", 7005, "replica", "loading") "]]"
        "]";
    ck_assert_int_eq(shards(r, "x", 0), 0);
    ck_assert_uint_eq(map.n, 2);
    ck_assert_str_eq(owner_of(0), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(150), "10.0.0.5:7004");
    ck_assert_str_eq(owner_of(250), "none");
    ck_assert_uint_eq(cluster_map_covered(&map), 200);
}
END_TEST

START_TEST(shards_gaps_ranges_and_a_primary_named_twice) {
    const char *r =
        "["
        " [\"slots\" [:0 :10 :20 :30 :16000 :16383] \"nodes\" ["
        NODE("a", "10.0.0.1", "10.0.0.1", 7000, "master", "online") "]]"
        " [\"slots\" [] \"nodes\" [" /* a shard without slots */
        NODE("b", "10.0.0.2", "10.0.0.2", 7001, "master", "online") "]]"
        " [\"slots\" [:11 :11] \"nodes\" [" /* the same primary: one address */
        NODE("a", "10.0.0.1", "10.0.0.1", 7000, "master", "online") "]]"
        "]";
    ck_assert_int_eq(shards(r, "x", 0), 0);
    ck_assert_uint_eq(map.n, 1);
    ck_assert_str_eq(owner_of(10), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(11), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(12), "none");
    ck_assert_str_eq(owner_of(19), "none");
    ck_assert_str_eq(owner_of(20), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(31), "none");
    ck_assert_str_eq(owner_of(15999), "none");
    ck_assert_str_eq(owner_of(16000), "10.0.0.1:7000");
    ck_assert_uint_eq(cluster_map_covered(&map), 11 + 1 + 11 + 384);

    /* No shard at all: an empty map, not an error (the caller wants one). */
    ck_assert_int_eq(shards("[]", "x", 0), 0);
    ck_assert_uint_eq(map.n, 0);
    ck_assert_uint_eq(cluster_map_covered(&map), 0);
}
END_TEST

START_TEST(shards_missing_fields_and_bad_ranges) {
    const char *node = NODE("a", "10.0.0.1", "10.0.0.1", 7000, "master", "online");
    char r[1024];
    /* not an array */
    ck_assert_int_eq(shards(":1", "x", 0), -1);
    ERR_HAS("CLUSTER SHARDS");
    ck_assert_int_eq(shards("[:1]", "x", 0), -1);
    ERR_HAS("shard 0");
    /* no nodes, no slots, or not arrays */
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1]]]", "x", 0), -1);
    ERR_HAS("shard 0");
    snprintf(r, sizeof(r), "[[\"nodes\" [%s]]]", node);
    ck_assert_int_eq(shards(r, "x", 0), -1);
    snprintf(r, sizeof(r), "[[\"slots\" \"0-1\" \"nodes\" [%s]]]", node);
    ck_assert_int_eq(shards(r, "x", 0), -1);
    /* a primary without ip, or without port */
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" [[\"port\" :7000 "
                            "\"role\" \"master\"]]]]", "x", 0), -1);
    ERR_HAS("shard 0 node 0");
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"h\" \"role\" \"master\"]]]]",
                            "x", 0), -1);
    ERR_HAS("shard 0 node 0");
    /* a node without a role is no primary */
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"h\" \"port\" :1]]]]",
                            "x", 0), 0);
    ck_assert_uint_eq(map.n, 0);
    /* bad ports */
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" ["
                            NODE("a", "h", "h", 0, "master", "online") "]]]", "x", 0), -1);
    ERR_HAS("port 0");
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" ["
                            NODE("a", "h", "h", 65536, "master", "online") "]]]", "x", 0), -1);
    ERR_HAS("port 65536");
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" ["
                            NODE("a", "h", "h", -7000, "master", "online") "]]]", "x", 0), -1);
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" ["
                            NODE("a", "h", "h", 65535, "master", "online") "]]]", "x", 0), 0);
    /* bad slot ranges */
    const char *ranges[] = {"[:5 :4]", "[:0 :16384]", "[:-1 :3]", "[\"0\" \"3\"]",
                            "[:0 [:1]]"};
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        snprintf(r, sizeof(r), "[[\"slots\" %s \"nodes\" [%s]]]", ranges[i], node);
        ck_assert_msg(shards(r, "x", 0) == -1, "%s taken", ranges[i]);
        ERR_HAS("slot range");
    }
    /* an odd element is left alone, as Redis never sends one */
    snprintf(r, sizeof(r), "[[\"slots\" [:0 :3 :7] \"nodes\" [%s]]]", node);
    ck_assert_int_eq(shards(r, "x", 0), 0);
    ck_assert_uint_eq(cluster_map_covered(&map), 4);
}
END_TEST

/* A reply naming n primaries, one slot each (CLUSTER SHARDS or SLOTS). */
static char *many(size_t n, int as_shards) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        if (as_shards)
            fprintf(f, "[\"slots\" [:%zu :%zu] \"nodes\" [[\"ip\" \"10.1.%zu.%zu\" \"port\" :7000 "
                    "\"role\" \"master\"]]]", i, i, i / 256, i % 256);
        else
            fprintf(f, "[:%zu :%zu [\"10.1.%zu.%zu\" :7000 \"id\"]]", i, i, i / 256, i % 256);
    fputc(']', f);
    fclose(f);
    return out;
}

START_TEST(too_many_primaries) {
    for (int as_shards = 0; as_shards <= 1; as_shards++) {
        char *r = many(CLUSTER_MAP_NODES_MAX, as_shards);
        ck_assert_int_eq(as_shards ? shards(r, "x", 0) : slots(r, "x"), 0);
        ck_assert_uint_eq(map.n, CLUSTER_MAP_NODES_MAX);
        ck_assert_str_eq(owner_of(CLUSTER_MAP_NODES_MAX - 1), "10.1.3.255:7000");
        free(r);
        r = many(CLUSTER_MAP_NODES_MAX + 1, as_shards);
        ck_assert_int_eq(as_shards ? shards(r, "x", 0) : slots(r, "x"), -1);
        ERR_HAS("more than 1024 primaries");
        free(r);
    }
}
END_TEST

START_TEST(host_names_too_long) {
    char host[CLUSTER_MAP_HOST_MAX + 1], r[1024];
    memset(host, 'h', sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(r, sizeof(r), "[[:0 :1 [\"%s\" :7000]]]", host);
    ck_assert_int_eq(slots(r, "x"), -1);
    host[CLUSTER_MAP_HOST_MAX - 1] = '\0'; /* 255 bytes: fits */
    snprintf(r, sizeof(r), "[[:0 :1 [\"%s\" :7000]]]", host);
    ck_assert_int_eq(slots(r, "x"), 0);
    ck_assert_uint_eq(strlen(map.addr[0].host), CLUSTER_MAP_HOST_MAX - 1);
}
END_TEST

/* field_int took a port given as a string with atoll(): "6379abc" was port
 * 6379, and a bad tls-port was 0, so the plain port was used instead. */
START_TEST(a_port_string_that_is_no_number_was_taken_as_one) {
    const char *bad[] = {"6379abc", "", " 6379", "+6379", "6379 ", "-1", "0x10",
                         "99999999999999999999"};
    char r[512];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(r, sizeof(r), "[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"10.0.0.1\" "
                 "\"port\" \"%s\" \"role\" \"master\"]]]]", bad[i]);
        ck_assert_msg(shards(r, "x", 0) == -1, "port \"%s\" taken as %d", bad[i],
                      map.n > 0 ? map.addr[0].port : -1);
        ERR_HAS("shard 0 node 0 (10.0.0.1)");
        ERR_HAS("port");
        ERR_HAS("not a number");
        /* The same as tls-port, with a good plain port beside it. */
        snprintf(r, sizeof(r), "[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"10.0.0.1\" "
                 "\"port\" :7000 \"tls-port\" \"%s\" \"role\" \"master\"]]]]", bad[i]);
        ck_assert_msg(shards(r, "x", 1) == -1, "tls-port \"%s\" taken: port %d", bad[i],
                      map.n > 0 ? map.addr[0].port : -1);
        ERR_HAS("tls-port");
        ERR_HAS("not a number");
    }
    /* Digits are a port, as an integer is. */
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"h\" \"port\" \"6379\" "
                            "\"role\" \"master\"]]]]", "x", 0), 0);
    ck_assert_str_eq(owner_of(0), "h:6379");
    ck_assert_int_eq(shards("[[\"slots\" [:0 :1] \"nodes\" [[\"ip\" \"h\" \"port\" :7000 "
                            "\"tls-port\" \"6380\" \"role\" \"master\"]]]]", "x", 1), 0);
    ck_assert_str_eq(owner_of(0), "h:6380");
}
END_TEST

/* ---- CLUSTER SLOTS --------------------------------------------------------- */

START_TEST(slots_primaries_replicas_and_gaps) {
    const char *r =
        "["
        " [:0 :5460 [\"10.0.0.1\" :7000 \"a1\"] [\"10.0.0.4\" :7003 \"a2\"]]"
        " [:5461 :10922 [\"\" :7001 \"b1\"]]" /* a node that does not know its address */
        " [:12000 :16383 [\"10.0.0.3\" :7002 \"c1\" [\"hostname\" \"c.example\"]]]"
        " [:10923 :10923 [\"10.0.0.1\" :7000 \"a1\"]]"
        "]";
    ck_assert_int_eq(slots(r, "seed"), 0);
    ck_assert_uint_eq(map.n, 3);
    ck_assert_str_eq(owner_of(0), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(5461), "seed:7001");
    ck_assert_str_eq(owner_of(10923), "10.0.0.1:7000");
    ck_assert_str_eq(owner_of(10924), "none");
    ck_assert_str_eq(owner_of(16383), "10.0.0.3:7002");
    ck_assert_uint_eq(cluster_map_covered(&map), KEYS_SLOTS - (12000 - 10924));
}
END_TEST

START_TEST(slots_malformed) {
    const char *bad[] = {
        ":1",                                  /* not an array */
        "[[:0 :1]]",                           /* no node */
        "[[:0 :1 [\"h\"]]]",                   /* no port */
        "[[:0 :1 [\"h\" \"7000\"]]]",          /* a port as a string */
        "[[:0 :1 [:1 :7000]]]",                /* a host as an integer */
        "[[\"0\" :1 [\"h\" :7000]]]",          /* a slot as a string */
        "[[:0 :1 [\"h\" :0]]]",                /* port 0 */
        "[[:0 :1 [\"h\" :70000]]]",            /* port 70000 */
        "[[:0 :16384 [\"h\" :7000]]]",         /* past the last slot */
        "[[:9 :8 [\"h\" :7000]]]",             /* backwards */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(slots(bad[i], "x") == -1, "%s taken", bad[i]);
        ck_assert_msg(strstr(err, "CLUSTER SLOTS") != NULL, "%s: %s", bad[i], err);
    }
    ck_assert_int_eq(slots("[]", "x"), 0);
    ck_assert_uint_eq(map.n, 0);
}
END_TEST

/* ---- MOVED and ASK --------------------------------------------------------- */

START_TEST(redirects) {
    unsigned slot = 0;
    cluster_map_addr_t a;
    ck_assert_int_eq(cluster_map_redirect("MOVED 3999 127.0.0.1:6381", &slot, &a),
                     CLUSTER_MAP_MOVED);
    ck_assert_uint_eq(slot, 3999);
    ck_assert_str_eq(a.host, "127.0.0.1");
    ck_assert_int_eq(a.port, 6381);
    ck_assert_int_eq(cluster_map_redirect("ASK 3999 redis-b.example:7001", &slot, &a),
                     CLUSTER_MAP_ASK);
    ck_assert_uint_eq(slot, 3999);
    ck_assert_str_eq(a.host, "redis-b.example");
    ck_assert_int_eq(a.port, 7001);
    ck_assert_int_eq(cluster_map_redirect("MOVED 0 ::1:7000", &slot, &a), CLUSTER_MAP_MOVED);
    ck_assert_uint_eq(slot, 0);
    ck_assert_str_eq(a.host, "::1");
    ck_assert_int_eq(cluster_map_redirect("MOVED 16383 [fe80::1]:65535", &slot, &a),
                     CLUSTER_MAP_MOVED);
    ck_assert_uint_eq(slot, 16383);
    ck_assert_str_eq(a.host, "fe80::1");
    ck_assert_int_eq(a.port, 65535);
}
END_TEST

START_TEST(redirects_malformed) {
    const char *bad[] = {
        "MOVED x y",
        "MOVED 99999 h:1",
        "MOVED 16384 h:1",
        "MOVED 3999 h",
        "MOVED 3999 h:",
        "MOVED 3999 h:0",
        "MOVED 3999 h:70000",
        "MOVED 3999 h:-1",
        "MOVED 3999 :6379",
        "MOVED 3999",
        "MOVED ",
        "MOVED",
        "ASK 3999 h:x",
        "MOVED +5 h:1",
        "MOVED  5 h:1",
        "MOVED -0 h:1",
        "MOVED 5 h:+1",
        "MOVED 5 h: 1",
        "MOVED 5 h:6379abc",
        "MOVED 5 h:99999999999999999999",
        "ASK x h:1",
        "moved 3999 h:1",
        "ERR MOVED 3999 h:1",
        "ASKING 3999 h:1",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned slot = 7;
        cluster_map_addr_t a;
        strcpy(a.host, "kept");
        ck_assert_msg(cluster_map_redirect(bad[i], &slot, &a) == CLUSTER_MAP_NO_REDIRECT,
                      "\"%s\" taken", bad[i]);
        ck_assert_uint_eq(slot, 7);
        ck_assert_str_eq(a.host, "kept");
    }
}
END_TEST

static Suite *cluster_map_suite(void) {
    Suite *s = suite_create("cluster_map");
    TCase *tc = tcase_create("cluster_map");
    tcase_add_test(tc, shards_of_three_primaries_with_replicas);
    tcase_add_test(tc, shards_read_again_forget_the_last_map);
    tcase_add_test(tc, shards_endpoint_hostname_ip_and_the_node_asked);
    tcase_add_test(tc, shards_tls_port);
    tcase_add_test(tc, shards_failed_and_loading_nodes);
    tcase_add_test(tc, shards_gaps_ranges_and_a_primary_named_twice);
    tcase_add_test(tc, shards_missing_fields_and_bad_ranges);
    tcase_add_test(tc, too_many_primaries);
    tcase_add_test(tc, host_names_too_long);
    tcase_add_test(tc, a_port_string_that_is_no_number_was_taken_as_one);
    tcase_add_test(tc, slots_primaries_replicas_and_gaps);
    tcase_add_test(tc, slots_malformed);
    tcase_add_test(tc, redirects);
    tcase_add_test(tc, redirects_malformed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(cluster_map_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
