/* Integration tests of tagged requests (issue 38): answered when ready, one name in order, CANCEL #tag, bad tags and attackers.
 * SPDX-License-Identifier: MIT
 *
 * Every rule of PROTOCOL.md's "Tagged requests", against a real
 * redis-server. Orders are checked by what comes next on a connection
 * after a step that can cause only one answer (a release on another
 * connection, a CANCEL): never by waiting a while to see what happens. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define TAG_MAX_LINE 4096   /* dlockd's default max_line */

/* ---- steps ------------------------------------------------------------------------------- */

/* The next line on c, which must begin with prefix; returned (c's buffer). */
static const char *expect_prefix(h_conn_t *c, const char *prefix, const char *what) {
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "%s: nothing, wanted '%s...'", what, prefix);
    ck_assert_msg(strncmp(l, prefix, strlen(prefix)) == 0, "%s: got '%s', wanted '%s...'", what,
                  l, prefix);
    return l;
}

/* The next line on c is "#<tag> OK <fence> <holds>" with holds as given;
 * returns the fence. */
static unsigned long long expect_granted(h_conn_t *c, const char *tag, long long holds) {
    char want[64];
    snprintf(want, sizeof(want), "#%s OK ", tag);
    const char *l = expect_prefix(c, want, "a tagged grant");
    unsigned long long fence = 0;
    long long got = -1;
    char tail;
    ck_assert_msg(sscanf(l + strlen(want), "%llu %lld%c", &fence, &got, &tail) == 2,
                  "not a grant: '%s'", l);
    ck_assert_msg(got == holds, "'%s': %lld holds, wanted %lld", l, got, holds);
    return fence;
}

/* Reads n lines from c, each beginning with one of the n prefixes in want
 * (in any order, each once): replies whose order the protocol leaves open. */
static void expect_set(h_conn_t *c, int n, const char *const want[]) {
    int seen[64] = {0};
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) {
        const char *l = h_recv(c, H_WAIT_MS);
        ck_assert_msg(l != NULL, "reply %d of %d: nothing (wanted e.g. '%s')", i + 1, n, want[0]);
        int k;
        for (k = 0; k < n; k++)
            if (!seen[k] && strncmp(l, want[k], strlen(want[k])) == 0) break;
        ck_assert_msg(k < n, "unexpected reply '%s' (%d of %d)", l, i + 1, n);
        seen[k] = 1;
    }
}

/* c sends "LOCK <prefix><i>" for i in 0..n-1, pipelined, and gets each. */
static void lock_all(h_conn_t *c, const char *prefix, int n) {
    for (int i = 0; i < n; i++) h_send(c, "LOCK %s%d\n", prefix, i);
    for (int i = 0; i < n; i++) H_EXPECT_PREFIX(c, "OK ");
}

/* c sends "<verb> <prefix><i>" for i in 0..n-1, pipelined; each reply
 * must begin with want. */
static void each_reply(h_conn_t *c, const char *verb, const char *prefix, int n,
                       const char *want) {
    for (int i = 0; i < n; i++) h_send(c, "%s %s%d\n", verb, prefix, i);
    for (int i = 0; i < n; i++) {
        const char *l = h_recv(c, H_WAIT_MS);
        ck_assert_msg(l != NULL && strncmp(l, want, strlen(want)) == 0,
                      "%s%d: got '%s', wanted '%s...'", prefix, i, l ? l : "(nothing)", want);
    }
}

/* c gets name within H_WAIT_MS and lets it go: nothing holds it for good
 * (a withdrawn acquire Redis had granted is undone, and that release
 * wakes this wait). */
static void await_free(h_conn_t *c, const char *name) {
    h_send(c, "TRYLOCK %s %d\n", name, H_WAIT_MS);
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "UNLOCK %s\n", name);
    H_EXPECT(c, "OK 0");
}

/* A permutation of 0..n-1 from a fixed seed: the same each run. */
static void shuffle(int *order, int n, unsigned seed) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Replaces the daemon's config file with server_keys in [server]; the
 * [redis] section the harness wrote stays. */
static void rewrite_conf(int index, const char *server_keys) {
    char old[512], url[512] = "";
    FILE *f = fopen(h_dlockd_conf(index), "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(old, sizeof(old), f) != NULL)
        if (strncmp(old, "url = ", 6) == 0) snprintf(url, sizeof(url), "%s", old);
    fclose(f);
    ck_assert_msg(url[0] != '\0', "no url in %s", h_dlockd_conf(index));
    f = fopen(h_dlockd_conf(index), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[server]\nadmin_uids = 0\n%s[redis]\n%scommand_timeout_ms = 1000\n"
               "connect_timeout_ms = 500\n", server_keys, url);
    fclose(f);
}

/* SIGHUP, and the log's next "reloaded". */
static void reload(int index) {
    int before = h_log_count(index, "reloaded");
    ck_assert_int_eq(kill(h_dlockd_pid(index), SIGHUP), 0);
    h_await_log(index, "reloaded", before + 1);
}

/* ---- tagged replies ---------------------------------------------------------------------- */

/* Each reply carries its request's tag (1 to 16 of 0-9 A-Z a-z _ -, as
 * sent, case and all), and only those: an untagged request is answered
 * as ever, and a '#' that is not the line's first word is a name. */
START_TEST(tagged_replies_carry_the_tag) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *x = h_connect_index(d), *a = h_connect_index(d);
    h_expect_reply(x, "#1 PING", "#1 OK PONG");
    h_expect_reply(x, "#Zz_-09azAZ12345 PING", "#Zz_-09azAZ12345 OK PONG"); /* 16 */
    h_expect_reply(x, "#- ping", "#- OK PONG");
    h_expect_reply(x, "#a PING", "#a OK PONG");
    h_expect_reply(x, "#A PING", "#A OK PONG");
    h_send(x, "#i INFO\n");
    expect_prefix(x, "#i OK version=", "tagged INFO");
    h_send(x, " \t#t \t LOCK t  \r\n"); /* blanks around, CRLF */
    unsigned long long f = expect_granted(x, "t", 1);
    char want[64];
    snprintf(want, sizeof(want), "#s OK MINE 1 ");
    h_send(x, "#s STATUS t\n");
    const char *l = expect_prefix(x, want, "tagged STATUS");
    char fence[32];
    snprintf(fence, sizeof(fence), " %llu", f);
    ck_assert_msg(strstr(l, fence) != NULL, "'%s' lacks the fence %llu", l, f);
    h_send(x, "#w WHO t\n");
    expect_prefix(x, "#w OK ", "tagged WHO");
    h_send(a, "LOCK h\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#o TRYLOCK h 0\n");
    expect_prefix(x, "#o TIMEOUT ", "tagged TRYLOCK of a held name");
    h_send(x, "#o2 TRYLOCK h 100\n"); /* a wait that ends */
    expect_prefix(x, "#o2 TIMEOUT ", "tagged TRYLOCK with a wait");
    h_expect_reply(x, "#u UNLOCK t", "#u OK 0");
    h_send(x, "#n UNLOCK t\n");
    expect_prefix(x, "#n ERR NOTHELD ", "tagged UNLOCK of nothing");
    h_expect_reply(x, "#f STATUS t", "#f OK FREE");
    h_send(x, "#h STATUS h\n");
    expect_prefix(x, "#h OK TAKEN ", "tagged STATUS of another's lock");
    /* untagged: as ever; "#7" after the verb is a name */
    h_expect_reply(x, "PING", "OK PONG");
    h_send(x, "LOCK #7\n");
    H_EXPECT_PREFIX(x, "OK ");
    h_send(x, "STATUS #7\n");
    H_EXPECT_PREFIX(x, "OK MINE 1 ");
    h_expect_reply(x, "UNLOCK #7", "OK 0");
    /* a tag is free again once its request is answered */
    h_send(x, "#t LOCK t\n");
    expect_granted(x, "t", 1);
    h_expect_reply(x, "#t UNLOCK t", "#t OK 0");
    h_close(a);
    h_close(x);
}
END_TEST

/* Tagged waits of one connection for names another holds are granted in
 * the order of the releases, each right after its own, not in the order
 * sent; while they wait, tagged PING, STATUS and INFO are answered. */
START_TEST(grants_follow_releases) {
    enum { N = 20 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "g", N);
    for (int i = 0; i < N; i++) h_send(x, "#%d LOCK g%d\n", i, i);
    h_await_waiters(adm, N);
    h_send(x, "#p PING\n#s STATUS g3\n#i INFO\n");
    const char *const answered[] = {"#p OK PONG", "#s OK TAKEN ", "#i OK version="};
    expect_set(x, 3, answered);
    /* CLIENTS: x holds none and has 20 requests in flight */
    h_send(adm, "CLIENTS\n");
    const char *l = expect_prefix(adm, "OK clients=3 shown=3 ", "CLIENTS");
    char busy[32];
    snprintf(busy, sizeof(busy), ":0:%d", N);
    ck_assert_msg(strstr(l, busy) != NULL, "'%s' lacks x's '...%s'", l, busy);
    /* release #3's name first: #3 is answered first */
    h_expect_reply(a, "UNLOCK g3", "OK 0");
    expect_granted(x, "3", 1);
    int order[N];
    shuffle(order, N, 38);
    for (int k = 0; k < N; k++) {
        int i = order[k];
        if (i == 3) continue;
        h_send(a, "UNLOCK g%d\n", i);
        H_EXPECT(a, "OK 0");
        char tag[8];
        snprintf(tag, sizeof(tag), "%d", i);
        expect_granted(x, tag, 1);
    }
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    ck_assert_int_eq(h_info_value(adm, "locks_held"), N);
    each_reply(x, "STATUS", "g", N, "OK MINE 1 ");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* ---- untagged requests: today's rules ---------------------------------------------------- */

/* An untagged LOCK that waits stops reading: a tagged PING behind it is
 * answered only after it. The connection's tagged waits go on meanwhile. */
START_TEST(untagged_wait_stops_reading) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    h_send(a, "LOCK u\nLOCK v\n");
    H_EXPECT_PREFIX(a, "OK ");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK v\n");
    h_await_waiters(adm, 1);
    h_send(x, "LOCK u\n#2 PING\n#3 STATUS v\n");
    h_await_waiters(adm, 2);
    /* the tagged wait is granted while the untagged one still waits */
    h_expect_reply(a, "UNLOCK v", "OK 0");
    expect_granted(x, "1", 1);
    h_expect_reply(a, "UNLOCK u", "OK 0");
    H_EXPECT_PREFIX(x, "OK "); /* the LOCK first: nothing behind it was read */
    H_EXPECT(x, "#2 OK PONG");
    expect_prefix(x, "#3 OK MINE 1 ", "STATUS read after the untagged LOCK");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* The bare CANCEL right behind an untagged wait withdraws it, with tagged
 * waits in progress; a tagged CANCEL, or CANCEL #tag, right behind it
 * does not (read in its turn), and a bare CANCEL does not withdraw a
 * tagged wait. */
START_TEST(bare_cancel_look_ahead) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "u", 1);
    lock_all(a, "v", 1);
    h_send(x, "#1 LOCK v0\n");
    h_await_waiters(adm, 1);
    h_send(x, "LOCK u0\nCANCEL\n");
    H_EXPECT(x, "ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_await_waiters(adm, 1);
    /* "#8 CANCEL" is no look-ahead: the LOCK waits on, then #8 finds nothing */
    h_send(x, "LOCK u0\n#8 CANCEL\n");
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK u0", "OK 0");
    H_EXPECT_PREFIX(x, "OK ");
    H_EXPECT(x, "#8 OK 0");
    h_expect_reply(x, "UNLOCK u0", "OK 0");
    h_send(a, "LOCK u0\n");
    H_EXPECT_PREFIX(a, "OK ");
    /* "CANCEL #1" behind an untagged wait: read once that is answered,
     * and then withdraws #1, still waiting */
    h_send(x, "LOCK u0\nCANCEL #1\n");
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK u0", "OK 0");
    H_EXPECT_PREFIX(x, "OK ");
    H_EXPECT(x, "#1 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_await_waiters(adm, 0);
    /* an untagged LOCK parked behind a tagged one on its name: withdrawn */
    h_send(x, "#2 LOCK v0\n");
    h_await_waiters(adm, 1);
    h_send(x, "LOCK v0\nCANCEL\n");
    H_EXPECT(x, "ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_expect_reply(a, "UNLOCK v0", "OK 0");
    expect_granted(x, "2", 1);
    h_expect_reply(x, "#3 UNLOCK v0", "#3 OK 0");
    h_send(a, "LOCK v0\n");
    H_EXPECT_PREFIX(a, "OK ");
    /* a bare CANCEL behind a tagged wait withdraws nothing */
    h_send(x, "#9 LOCK v0\nCANCEL\n");
    H_EXPECT(x, "OK 0");
    h_await_waiters(adm, 1);
    h_expect_reply(a, "UNLOCK v0", "OK 0");
    expect_granted(x, "9", 1);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* ---- one name in order ------------------------------------------------------------------- */

/* #1 LOCK x (waits) #2 UNLOCK x #3 LOCK x: #2 starts only once #1 is
 * answered, #3 once #2 is; STATUS x is answered at once meanwhile. An
 * untagged request on the name waits its turn too, and reading stops
 * behind it. A semaphore's requests alike, but for the exception: a
 * RELEASE of permits held passes the connection's ACQUIRE waiting. */
START_TEST(one_name_in_order) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    h_send(a, "LOCK x\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK x\n#2 UNLOCK x\n#3 LOCK x\n#4 STATUS x\n");
    expect_prefix(x, "#4 OK TAKEN ", "STATUS while #1 waits");
    ck_assert_int_eq(h_info_value(adm, "waiters"), 1); /* #2 and #3 wait their turn */
    h_expect_reply(a, "UNLOCK x", "OK 0");
    unsigned long long f1 = expect_granted(x, "1", 1);
    H_EXPECT(x, "#2 OK 0");
    unsigned long long f3 = expect_granted(x, "3", 1);
    ck_assert_msg(f3 > f1, "fences %llu then %llu", f1, f3);
    h_send(x, "#5 STATUS x\n");
    expect_prefix(x, "#5 OK MINE 1 ", "STATUS after #3");
    h_expect_reply(x, "#6 UNLOCK x", "#6 OK 0");

    /* untagged behind tagged on one name: parked, and reading stops */
    h_send(a, "LOCK x\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK x\nUNLOCK x\n#2 PING\n");
    h_await_waiters(adm, 1);
    h_expect_reply(a, "UNLOCK x", "OK 0");
    expect_granted(x, "1", 1);
    H_EXPECT(x, "OK 0");
    H_EXPECT(x, "#2 OK PONG");

    /* a semaphore: #2 RELEASE after #1 ACQUIRE */
    h_expect_reply(a, "SEMINIT s 1", "OK 1");
    h_expect_reply(a, "ACQUIRE s 1", "OK 1");
    h_send(x, "#1 ACQUIRE s 1\n#2 RELEASE s 1\n#3 PING\n");
    H_EXPECT(x, "#3 OK PONG");
    ck_assert_int_eq(h_info_value(adm, "waiters"), 1);
    h_expect_reply(a, "RELEASE s 1", "OK 0");
    H_EXPECT(x, "#1 OK 1");
    H_EXPECT(x, "#2 OK 0");
    h_expect_reply(adm, "STATUS s", "OK SEM 1 0");

    /* the exception: a release of what the connection holds passes its
     * own request waiting on the name (for the very permits it gives) */
    h_expect_reply(a, "SEMINIT t 2", "OK 1");
    h_expect_reply(x, "#1 ACQUIRE t 1", "#1 OK 1");
    h_expect_reply(a, "ACQUIRE t 1", "OK 1");
    h_send(x, "#2 ACQUIRE t 1\n");
    h_await_waiters(adm, 1);
    h_send(x, "#3 RELEASE t 1\n");
    H_EXPECT(x, "#3 OK 0");
    H_EXPECT(x, "#2 OK 1");
    h_expect_reply(x, "#4 RELEASE t 1", "#4 OK 0");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* An MLOCK sharing a name with an earlier request waits for its answer
 * (nothing of it queued meanwhile), and an UNLOCK of one of its names
 * waits for the MLOCK's; a request on other names goes at once. */
START_TEST(mlock_shares_a_name_in_order) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    h_send(a, "LOCK y\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#5 LOCK y\n#6 MLOCK 2 z y\n#7 UNLOCK z\n#8 LOCK q\n");
    expect_granted(x, "8", 1); /* q is no one's: at once */
    ck_assert_int_eq(h_info_value(adm, "waiters"), 1); /* #6 not queued */
    h_expect_reply(adm, "STATUS z", "OK FREE");
    h_expect_reply(a, "UNLOCK y", "OK 0");
    unsigned long long fy = expect_granted(x, "5", 1);
    const char *l = expect_prefix(x, "#6 OK ", "the MLOCK after #5");
    unsigned long long mz = 0, my = 0;
    ck_assert_msg(sscanf(l, "#6 OK %llu %llu", &mz, &my) == 2, "'%s'", l);
    ck_assert_msg(my == fy, "'%s': y re-entered with fence %llu, wanted %llu", l, my, fy);
    H_EXPECT(x, "#7 OK 0");
    h_send(x, "#9 STATUS y\n");
    expect_prefix(x, "#9 OK MINE 2 ", "y: #5 and the MLOCK");
    h_expect_reply(adm, "STATUS z", "OK FREE");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* Two tags locking one name make a reentry, as two LOCKs in sequence do:
 * the second waits for the first's answer, then holds 2 with its fence. */
START_TEST(two_tags_reenter) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    h_send(x, "#1 LOCK r\n#2 LOCK r\n");
    unsigned long long f1 = expect_granted(x, "1", 1);
    unsigned long long f2 = expect_granted(x, "2", 2);
    ck_assert_msg(f1 == f2, "a reentry's fence %llu, the hold's %llu", f2, f1);
    h_send(x, "#3 STATUS r\n");
    expect_prefix(x, "#3 OK MINE 2 ", "two tags' holds");
    h_send(x, "#4 UNLOCK r\n#5 UNLOCK r\n#6 UNLOCK r\n");
    H_EXPECT(x, "#4 OK 1");
    H_EXPECT(x, "#5 OK 0");
    expect_prefix(x, "#6 ERR NOTHELD ", "a third UNLOCK");
    h_expect_reply(b, "STATUS r", "OK FREE");
    /* both waiting for another's hold */
    h_send(a, "LOCK r\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK r\n#2 LOCK r\n");
    h_await_waiters(b, 1);
    h_expect_reply(a, "UNLOCK r", "OK 0");
    f1 = expect_granted(x, "1", 1);
    f2 = expect_granted(x, "2", 2);
    ck_assert_msg(f1 == f2, "a reentry's fence %llu, the hold's %llu", f2, f1);
    h_close(b);
    h_close(x);
    h_close(a);
}
END_TEST

/* ---- CANCEL #tag ------------------------------------------------------------------------- */

/* CANCEL #7 withdraws a waiting tagged request of each kind: #7 ERR
 * CANCELLED first, then OK 1; nothing of it held, the name free once its
 * holder lets go. A tagged CANCEL: #7's answer, then #8 OK 1. */
START_TEST(cancel_tag_withdraws_a_wait) {
    static const struct {
        const char *hold, *request, *release, *name, *free;
    } k[] = {
        {"LOCK c", "LOCK c", "UNLOCK c", "c", "OK FREE"},
        {"LOCK c", "TRYLOCK c 60000", "UNLOCK c", "c", "OK FREE"},
        {"FAIRLOCK f", "FAIRLOCK f", "UNLOCK f", "f", "OK FREE"},
        {"WLOCK w", "RLOCK w", "WUNLOCK w", "w", "OK FREE"},
        {"ACQUIRE s 1", "ACQUIRE s 1", "RELEASE s 1", "s", "OK SEM 1 0"},
        {"LOCK m2", "MLOCK 2 m1 m2", "UNLOCK m2", "m2", "OK FREE"},
    };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    h_expect_reply(a, "SEMINIT s 1", "OK 1");
    long long cancelled = 0;
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        h_send(a, "%s\n", k[i].hold);
        H_EXPECT_PREFIX(a, "OK ");
        h_send(x, "#7 %s\n", k[i].request);
        h_await_waiters(b, 1);
        if (i % 2 == 0) {
            h_send(x, "CANCEL #7\n");
            H_EXPECT(x, "#7 ERR CANCELLED the wait was cancelled");
            H_EXPECT(x, "OK 1");
        } else {
            h_send(x, "#8 CANCEL #7\n");
            H_EXPECT(x, "#7 ERR CANCELLED the wait was cancelled");
            H_EXPECT(x, "#8 OK 1");
        }
        cancelled++;
        h_await_waiters(b, 0);
        h_expect_reply(a, k[i].release, "OK 0");
        if (strstr(k[i].request, "MLOCK") != NULL) h_expect_reply(b, "STATUS m1", "OK FREE");
        char status[64];
        snprintf(status, sizeof(status), "STATUS %s", k[i].name);
        h_expect_reply(b, status, k[i].free);
        h_expect_reply(x, "#9 PING", "#9 OK PONG"); /* nothing more of #7 */
    }
    /* withdrawn while Redis runs it: what it granted is undone */
    h_send(x, "#7 LOCK e\nCANCEL #7\n");
    H_EXPECT(x, "#7 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    cancelled++;
    await_free(b, "e");
    h_expect_reply(x, "#9 PING", "#9 OK PONG");
    ck_assert_int_eq(h_info_value(b, "cancelled"), cancelled);
    ck_assert_int_eq(h_info_value(b, "locks_held"), 0);
    h_close(b);
    h_close(x);
    h_close(a);
}
END_TEST

/* CANCEL of a tag not in progress, or of a request that is no wait, is
 * OK 0, and what that request does goes on; a bad argument is ERR ARGS. */
START_TEST(cancel_tag_not_a_wait) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *x = h_connect_index(d), *b = h_connect_index(d);
    h_expect_reply(x, "CANCEL #nope", "OK 0");
    h_expect_reply(x, "#1 CANCEL #nope", "#1 OK 0");
    h_send(x, "#3 LOCK k\n");
    expect_granted(x, "3", 1);
    h_expect_reply(x, "CANCEL #3", "OK 0"); /* answered: held, the client's to release */
    h_send(x, "#4 STATUS k\n");
    expect_prefix(x, "#4 OK MINE 1 ", "k after CANCEL #3");
    /* in progress, but not waits: their answers come */
    h_send(x, "#5 STATUS q\nCANCEL #5\n");
    const char *const status[] = {"#5 OK FREE", "OK 0"};
    expect_set(x, 2, status);
    h_send(x, "#6 PING\nCANCEL #6\n");
    H_EXPECT(x, "#6 OK PONG");
    H_EXPECT(x, "OK 0");
    h_send(x, "#7 LIST k 10\nCANCEL #7\n");
    const char *l = h_recv(x, H_WAIT_MS);
    ck_assert_ptr_nonnull(l);
    int zero_first = strcmp(l, "OK 0") == 0;
    if (zero_first) l = h_recv(x, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "#7 OK LIST 1 0") == 0, "got '%s'", l ? l : "");
    expect_prefix(x, "= k ", "LIST's entry");
    if (!zero_first) H_EXPECT(x, "OK 0");
    h_send(x, "#8 UNLOCK k\nCANCEL #8\n");
    const char *const unlock[] = {"#8 OK 0", "OK 0"};
    expect_set(x, 2, unlock);
    h_expect_reply(b, "STATUS k", "OK FREE");
    /* bad arguments */
    h_expect_reply(x, "CANCEL 7", "ERR ARGS CANCEL [#<tag>]");
    h_expect_reply(x, "CANCEL #", "ERR ARGS CANCEL [#<tag>]");
    h_expect_reply(x, "CANCEL #7 #8", "ERR ARGS CANCEL [#<tag>]");
    h_expect_reply(x, "CANCEL #12345678901234567", "ERR ARGS CANCEL [#<tag>]");
    h_expect_reply(x, "CANCEL #a.b", "ERR ARGS CANCEL [#<tag>]");
    h_expect_reply(x, "#9 CANCEL now", "#9 ERR ARGS CANCEL [#<tag>]");
    ck_assert_int_eq(h_info_value(b, "cancelled"), 0);
    h_close(b);
    h_close(x);
}
END_TEST

/* One of 20 tagged waits cancelled: it holds nothing, and the other 19
 * are each granted right after their own release. */
START_TEST(cancel_one_of_twenty) {
    enum { N = 20, VICTIM = 5 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    lock_all(a, "c", N);
    for (int i = 0; i < N; i++) h_send(x, "#t%d LOCK c%d\n", i, i);
    h_await_waiters(b, N);
    h_send(x, "CANCEL #t%d\n", VICTIM);
    H_EXPECT(x, "#t5 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_await_waiters(b, N - 1);
    int order[N];
    shuffle(order, N, 2026);
    for (int k = 0; k < N; k++) {
        int i = order[k];
        h_send(a, "UNLOCK c%d\n", i);
        H_EXPECT(a, "OK 0");
        if (i == VICTIM) {
            h_expect_reply(b, "STATUS c5", "OK FREE");
            continue;
        }
        char tag[8];
        snprintf(tag, sizeof(tag), "t%d", i);
        expect_granted(x, tag, 1);
    }
    ck_assert_int_eq(h_info_value(b, "waiters"), 0);
    ck_assert_int_eq(h_info_value(b, "locks_held"), N - 1);
    h_expect_reply(x, "STATUS c5", "OK FREE");
    h_close(b);
    h_close(x);
    h_close(a);
}
END_TEST

/* A request parked behind an earlier one on its name is withdrawn at
 * once, and never runs; cancelling the earlier one lets those behind it
 * start in order. */
START_TEST(cancel_parked) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    h_send(a, "LOCK p\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK p\n#2 LOCK p\n#3 PING\n");
    H_EXPECT(x, "#3 OK PONG");
    ck_assert_int_eq(h_info_value(b, "waiters"), 1);
    h_send(x, "CANCEL #2\n");
    H_EXPECT(x, "#2 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_expect_reply(a, "UNLOCK p", "OK 0");
    expect_granted(x, "1", 1);
    h_send(x, "#4 STATUS p\n");
    expect_prefix(x, "#4 OK MINE 1 ", "p: #1 only, #2 never ran");
    h_expect_reply(x, "UNLOCK p", "OK 0");

    /* the first withdrawn: #2 and #3 start in turn */
    h_send(a, "LOCK p\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#1 LOCK p\n#2 UNLOCK p\n#3 LOCK p\n#4 PING\n");
    H_EXPECT(x, "#4 OK PONG");
    h_send(x, "#5 CANCEL #1\n");
    H_EXPECT(x, "#1 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "#5 OK 1");
    expect_prefix(x, "#2 ERR NOTHELD ", "#2 after #1 withdrawn");
    h_await_waiters(b, 1); /* #3 */
    h_expect_reply(a, "UNLOCK p", "OK 0");
    expect_granted(x, "3", 1);
    h_close(b);
    h_close(x);
    h_close(a);
}
END_TEST

/* ELECT and RESIGN of one name in order; LEADER, OBSERVE and UNOBSERVE
 * answered while the ELECT waits, an UNOBSERVE after the OBSERVE before
 * it; !LEADER events untagged. */
START_TEST(elect_in_order_events_untagged) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    h_send(a, "ELECT e va\n");
    const char *l = expect_prefix(a, "OK ", "a's ELECT");
    unsigned long long fa = strtoull(l + 3, NULL, 10);
    char want[96];
    snprintf(want, sizeof(want), "#o OK %llu va", fa);
    h_expect_reply(x, "#o OBSERVE e", want);
    h_send(x, "#1 ELECT e vx\n#2 RESIGN e\n#3 LEADER e\n");
    snprintf(want, sizeof(want), "#3 OK %llu va", fa);
    H_EXPECT(x, want); /* at once: #1 waits, #2 waits its turn */
    /* OBSERVE and UNOBSERVE take turns among themselves only: a
     * campaign waiting holds back neither */
    h_send(x, "#6 OBSERVE e\n#7 UNOBSERVE f\n#8 OBSERVE f\n#9 UNOBSERVE f\n");
    snprintf(want, sizeof(want), "#6 OK %llu va", fa);
    const char *const observe[] = {want, "#7 OK 0", "#8 OK NONE", "#9 OK 1"};
    int at[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) {
        l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL, "OBSERVE and UNOBSERVE: reply %d of 4: nothing", i + 1);
        int k = 0;
        while (k < 4 && (at[k] >= 0 || strcmp(l, observe[k]) != 0)) k++;
        ck_assert_msg(k < 4, "OBSERVE and UNOBSERVE: '%s'", l);
        at[k] = i;
    }
    ck_assert_msg(at[2] < at[3], "#9 UNOBSERVE f answered before #8 OBSERVE f");
    ck_assert_int_eq(h_info_value(adm, "candidates"), 1);
    h_expect_reply(a, "RESIGN e", "OK 1");
    int elected = 0, resigned = 0;
    while (!resigned) {
        l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL, "elected %d, resigned %d", elected, resigned);
        if (strncmp(l, "!LEADER e ", 10) == 0) continue;
        if (strncmp(l, "#1 OK ", 6) == 0) {
            ck_assert_msg(strtoull(l + 6, NULL, 10) > fa, "'%s' after fence %llu", l, fa);
            elected = 1;
        } else {
            ck_assert_msg(strcmp(l, "#2 OK 1") == 0, "'%s'", l); /* it led: after #1 */
            ck_assert_msg(elected, "#2 answered before #1");
            resigned = 1;
        }
    }
    /* the observer is told the end; events carry no tag */
    for (;;) {
        l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL && strncmp(l, "!LEADER e ", 10) == 0, "'%s'", l ? l : "");
        if (strcmp(l, "!LEADER e NONE") == 0) break;
    }
    h_expect_reply(x, "#4 LEADER e", "#4 OK NONE");
    h_expect_reply(x, "#5 UNOBSERVE e", "#5 OK 1");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* ---- LIST -------------------------------------------------------------------------------- */

/* A tagged LIST's block is written whole, its first line tagged, while
 * the connection's tagged waits are granted and its locks are lost
 * (FORCEUNLOCK: untagged !LOST events) in the same moment. */
START_TEST(tagged_list_block_whole) {
    enum { HELD = 200, WAITS = 20, LOST = 10 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "g", WAITS);
    for (int i = 0; i < HELD; i++) h_send(x, "#h%d LOCK l%03d\n", i, i);
    for (int i = 0; i < HELD; i++) expect_prefix(x, "#h", "the held names");
    for (int i = 0; i < LOST; i++) h_send(x, "#f%d LOCK f%d\n", i, i);
    for (int i = 0; i < LOST; i++) expect_prefix(x, "#f", "the names to lose");
    for (int i = 0; i < WAITS; i++) h_send(x, "#g%d LOCK g%d\n", i, i);
    h_await_waiters(adm, WAITS);
    /* all of it in one loop pass of the daemon, then as it comes */
    pid_t pid = h_dlockd_pid(d);
    kill(pid, SIGSTOP);
    h_send(x, "#L LIST * 1000\n");
    for (int i = 0; i < WAITS; i++) h_send(a, "UNLOCK g%d\n", i);
    for (int i = 0; i < LOST; i++) h_send(adm, "FORCEUNLOCK f%d\n", i);
    kill(pid, SIGCONT);
    int grants = 0, lost = 0, lists = 0;
    while (grants < WAITS || lost < LOST || lists < 1) {
        const char *l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL, "%d grants, %d !LOST, %d LIST blocks", grants, lost, lists);
        int n = -1, more = -1;
        if (sscanf(l, "#L OK LIST %d %d", &n, &more) == 2) {
            ck_assert_int_ge(n, HELD);
            for (int i = 0; i < n; i++) {
                l = h_recv(x, H_WAIT_MS);
                ck_assert_msg(l != NULL && strncmp(l, "= ", 2) == 0,
                              "LIST's entry %d of %d: got '%s'", i + 1, n, l ? l : "(nothing)");
            }
            lists++;
        } else if (strncmp(l, "#g", 2) == 0) {
            ck_assert_msg(strstr(l, " OK ") != NULL, "'%s'", l);
            grants++;
        } else if (strncmp(l, "!LOST f", 7) == 0) {
            ck_assert_msg(strstr(l, " forced") != NULL, "'%s'", l);
            lost++;
        } else {
            ck_abort_msg("outside LIST's block: '%s'", l);
        }
    }
    ck_assert_int_eq(lists, 1);
    for (int i = 0; i < WAITS; i++) H_EXPECT(a, "OK 0");
    for (int i = 0; i < LOST; i++) H_EXPECT(adm, "OK 1");
    h_expect_reply(x, "#p PING", "#p OK PONG");
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* ---- bad input --------------------------------------------------------------------------- */

#define TAG_FORM "ERR ARGS a tag is # and 1 to 16 of 0-9 A-Z a-z _ -"
#define TAG_ALONE "ERR ARGS a tag is followed by a request"

/* A malformed tag, or a tag with nothing after it, is an untagged ERR
 * ARGS in the untagged order (behind an untagged wait: after it); a
 * tagged wait in progress is not disturbed. */
START_TEST(malformed_tags) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "h", 2);
    h_send(x, "#1 LOCK h0\n");
    h_await_waiters(adm, 1);
    h_expect_reply(x, "#", TAG_FORM);
    h_expect_reply(x, "# PING", TAG_FORM);
    h_expect_reply(x, "#12345678901234567 PING", TAG_FORM); /* 17 */
    h_expect_reply(x, "#a.b PING", TAG_FORM);
    h_expect_reply(x, "#a:b PING", TAG_FORM);
    h_expect_reply(x, "#\xc3\xa9 PING", TAG_FORM);
    h_expect_reply(x, "#7", TAG_ALONE);
    h_expect_reply(x, "#7 \t ", TAG_ALONE);
    h_expect_reply(x, "#1", TAG_ALONE); /* #1's tag, but no request */
    /* behind an untagged wait: in its turn */
    h_send(x, "LOCK h1\n#\n#2 PING\n");
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK h1", "OK 0");
    H_EXPECT_PREFIX(x, "OK ");
    H_EXPECT(x, TAG_FORM);
    H_EXPECT(x, "#2 OK PONG");
    /* #1 waited through all of it */
    h_expect_reply(a, "UNLOCK h0", "OK 0");
    expect_granted(x, "1", 1);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* A tag in progress (waiting, or parked behind an earlier request) gets
 * "#7 ERR ARGS tag in use", whatever the request (CANCEL #7 too), and
 * that request is not disturbed: it is granted later. */
START_TEST(tag_in_use) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    h_send(a, "LOCK h\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#7 LOCK h\n#8 LOCK h\n");
    h_await_waiters(b, 1);
    h_expect_reply(x, "#7 PING", "#7 ERR ARGS tag in use");
    h_expect_reply(x, "#7 LOCK other", "#7 ERR ARGS tag in use");
    h_expect_reply(x, "#7 UNLOCK h", "#7 ERR ARGS tag in use");
    h_expect_reply(x, "#7 CANCEL #7", "#7 ERR ARGS tag in use");
    h_expect_reply(x, "#7 CANCEL #8", "#7 ERR ARGS tag in use");
    h_expect_reply(x, "#8 STATUS h", "#8 ERR ARGS tag in use"); /* parked: in progress */
    h_expect_reply(x, "#8 FOO", "#8 ERR ARGS tag in use");
    h_expect_reply(b, "STATUS other", "OK FREE");
    ck_assert_int_eq(h_info_value(b, "waiters"), 1);
    /* tags are case-sensitive: #a and #A are two */
    h_send(a, "LOCK h2\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(x, "#a LOCK h2\n#A LOCK h2\n");
    h_await_waiters(b, 2);
    h_expect_reply(x, "CANCEL #A", "#A ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_expect_reply(x, "CANCEL #a", "#a ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    ck_assert_int_eq(h_info_value(b, "waiters"), 1);
    h_expect_reply(a, "UNLOCK h", "OK 0");
    unsigned long long f = expect_granted(x, "7", 1);
    ck_assert_int_eq(expect_granted(x, "8", 2), f);
    h_expect_reply(x, "#7 PING", "#7 OK PONG");
    h_close(b);
    h_close(x);
    h_close(a);
}
END_TEST

/* More than [server] max_inflight tagged requests in progress: #5 ERR
 * LIMIT max_inflight reached. PING (never in progress) and untagged
 * requests are not counted. A reload raises and lowers it; the requests
 * in progress are not disturbed. */
START_TEST(max_inflight) {
    h_redis_start();
    int d = h_dlockd_start("[server]\nmax_inflight = 4\n");
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "h", 10);
    h_send(x, "#1 LOCK h1\n#2 LOCK h2\n#3 LOCK h3\n#4 LOCK h4\n#5 LOCK h5\n#6 PING\n"
              "#7 STATUS h1\n");
    H_EXPECT(x, "#5 ERR LIMIT max_inflight reached");
    H_EXPECT(x, "#6 OK PONG");
    H_EXPECT(x, "#7 ERR LIMIT max_inflight reached");
    ck_assert_int_eq(h_info_value(adm, "waiters"), 4);
    h_send(x, "STATUS h1\n");
    H_EXPECT_PREFIX(x, "OK TAKEN ");
    h_expect_reply(a, "UNLOCK h1", "OK 0");
    expect_granted(x, "1", 1);
    h_send(x, "#5 LOCK h5\n"); /* room for one */
    h_await_waiters(adm, 4);
    h_expect_reply(x, "#6 LOCK h6", "#6 ERR LIMIT max_inflight reached");

    rewrite_conf(d, "max_inflight = 6\n");
    reload(d);
    h_send(x, "#6 LOCK h6\n#8 LOCK h7\n#9 LOCK h8\n");
    H_EXPECT(x, "#9 ERR LIMIT max_inflight reached");
    h_await_waiters(adm, 6); /* #2 #3 #4 #5 #6 #8 */

    rewrite_conf(d, "max_inflight = 2\n");
    reload(d);
    h_expect_reply(x, "#a LOCK h9", "#a ERR LIMIT max_inflight reached");
    for (int i = 2; i <= 5; i++) {
        h_send(a, "UNLOCK h%d\n", i);
        H_EXPECT(a, "OK 0");
        char tag[4];
        snprintf(tag, sizeof(tag), "%d", i);
        expect_granted(x, tag, 1);
    }
    h_expect_reply(x, "#a LOCK h9", "#a ERR LIMIT max_inflight reached"); /* 2 of 2 */
    h_expect_reply(a, "UNLOCK h6", "OK 0");
    expect_granted(x, "6", 1);
    h_send(x, "#a LOCK h9\n"); /* 1 of 2 */
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK h7", "OK 0");
    expect_granted(x, "8", 1);
    h_expect_reply(a, "UNLOCK h9", "OK 0");
    expect_granted(x, "a", 1);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* A well-formed tag before a bad request keeps its tag: UNKNOWN, ARGS,
 * NAME, NOTHELD, KIND; a second '#' word is the command word. */
START_TEST(tagged_errors_keep_the_tag) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *x = h_connect_index(d);
    h_send(x, "#7 FOO\n");
    expect_prefix(x, "#7 ERR UNKNOWN ", "an unknown verb");
    h_send(x, "#7 #8 LOCK x\n");
    expect_prefix(x, "#7 ERR UNKNOWN ", "a second tag");
    h_send(x, "#7 LOCK\n");
    expect_prefix(x, "#7 ERR ARGS ", "LOCK without a name");
    h_send(x, "#7 LOCK a b c d\n");
    expect_prefix(x, "#7 ERR ARGS ", "LOCK with too many words");
    h_send(x, "#7 TRYLOCK x abc\n");
    expect_prefix(x, "#7 ERR ARGS ", "a bad number");
    h_send(x, "#7 ACQUIRE s 0\n");
    expect_prefix(x, "#7 ERR ARGS ", "no permits");
    char name[300];
    memset(name, 'n', sizeof(name));
    h_send(x, "#7 LOCK %.*s\n", (int)sizeof(name), name);
    expect_prefix(x, "#7 ERR NAME ", "a name too long");
    h_send(x, "#7 UNLOCK nothere\n");
    expect_prefix(x, "#7 ERR NOTHELD ", "UNLOCK of nothing");
    h_send(x, "#7 LOCK k\n#8 WLOCK k\n");
    expect_granted(x, "7", 1);
    expect_prefix(x, "#8 ERR KIND ", "WLOCK of a plain lock");
    h_expect_reply(x, "#9 UNLOCK k", "#9 OK 0");
    h_send(x, "#q QUIT\n");
    H_EXPECT(x, "#q OK BYE");
    ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
    h_close(x);
}
END_TEST

/* A line past max_line is an untagged ERR TOOLONG, tag or not, and the
 * connection closes; the tagged waits in progress are withdrawn first
 * (ERR CANCELLED), nothing of them held. */
START_TEST(tagged_line_too_long) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    static char line[TAG_MAX_LINE + 64];
    memset(line, 'n', sizeof(line));
    memcpy(line, "#7 LOCK ", 8);
    line[sizeof(line) - 1] = '\n';
    h_send_raw(x, line, sizeof(line));
    H_EXPECT_PREFIX(x, "ERR TOOLONG ");
    ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
    h_close(x);

    lock_all(a, "h", 2);
    x = h_connect_index(d);
    h_send(x, "#1 LOCK h0\n#2 LOCK h1\n#3 UNLOCK h1\n");
    h_await_waiters(b, 2);
    h_send_raw(x, line, sizeof(line));
    const char *const drained[] = {"ERR TOOLONG ", "#1 ERR CANCELLED the wait was cancelled",
                                   "#2 ERR CANCELLED the wait was cancelled",
                                   "#3 ERR CANCELLED the wait was cancelled"};
    expect_set(x, 4, drained);
    ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
    h_close(x);
    h_await_waiters(b, 0);
    h_expect_reply(a, "UNLOCK h0", "OK 0");
    h_expect_reply(a, "UNLOCK h1", "OK 0");
    h_expect_reply(b, "STATUS h0", "OK FREE");
    h_expect_reply(b, "STATUS h1", "OK FREE");
    h_close(b);
    h_close(a);
}
END_TEST

/* QUIT, tagged or not, with tagged requests in progress: each wait (and
 * each request parked behind one) is withdrawn, ERR CANCELLED, a LIST in
 * flight answered, then BYE last, and the connection closes; nothing of
 * the waits is held. */
START_TEST(quit_withdraws_tagged_waits) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    lock_all(a, "h", 2);
    for (int round = 0; round < 2; round++) {
        h_send(x, "#1 LOCK h0\n#2 MLOCK 2 m h1\n#3 UNLOCK h0\n");
        h_await_waiters(b, 2);
        h_send(x, "#4 LIST * 10\n%s\n", round == 0 ? "QUIT" : "#q QUIT");
        const char *const drained[] = {"#1 ERR CANCELLED the wait was cancelled",
                                       "#2 ERR CANCELLED the wait was cancelled",
                                       "#3 ERR CANCELLED the wait was cancelled",
                                       "#4 OK LIST "};
        int entries = 0;
        for (int i = 0; i < 4; i++) {
            const char *l = h_recv(x, H_WAIT_MS);
            ck_assert_msg(l != NULL, "QUIT: reply %d of 4: nothing", i + 1);
            if (sscanf(l, "#4 OK LIST %d", &entries) == 1) {
                for (int e = 0; e < entries; e++) expect_prefix(x, "= ", "LIST's entries");
                continue;
            }
            int k;
            for (k = 0; k < 3; k++)
                if (strcmp(l, drained[k]) == 0) break;
            ck_assert_msg(k < 3, "QUIT: '%s'", l);
        }
        H_EXPECT(x, round == 0 ? "OK BYE" : "#q OK BYE");
        ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
        h_close(x);
        h_await_waiters(b, 0);
        h_expect_reply(b, "STATUS m", "OK FREE");
        x = h_connect_index(d);
    }
    h_expect_reply(a, "UNLOCK h0", "OK 0");
    h_expect_reply(a, "UNLOCK h1", "OK 0");
    h_expect_reply(b, "STATUS h0", "OK FREE");
    h_expect_reply(b, "STATUS h1", "OK FREE");
    h_close(x);
    h_close(b);
    h_close(a);
}
END_TEST

/* ---- limits ------------------------------------------------------------------------------ */

/* max_waiters_per_uid counts one connection's tagged waits. */
START_TEST(waiters_per_uid_counts_tagged) {
    h_redis_start();
    int d = h_dlockd_start("[server]\nmax_waiters_per_uid = 3\n");
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "w", 4);
    h_send(x, "#0 LOCK w0\n#1 LOCK w1\n#2 LOCK w2\n#3 LOCK w3\n");
    H_EXPECT(x, "#3 ERR LIMIT max_waiters_per_uid reached");
    ck_assert_int_eq(h_info_value(adm, "waiters"), 3);
    h_send(x, "CANCEL #0\n");
    H_EXPECT(x, "#0 ERR CANCELLED the wait was cancelled");
    H_EXPECT(x, "OK 1");
    h_send(x, "#4 LOCK w3\n"); /* room for one */
    h_await_waiters(adm, 3);
    h_expect_reply(x, "#5 LOCK w0", "#5 ERR LIMIT max_waiters_per_uid reached");
    h_expect_reply(x, "LOCK w0", "ERR LIMIT max_waiters_per_uid reached"); /* untagged too */
    h_expect_reply(a, "UNLOCK w1", "OK 0");
    expect_granted(x, "1", 1);
    h_send(x, "#5 LOCK w0\n");
    h_await_waiters(adm, 3);
    h_expect_reply(a, "UNLOCK w2", "OK 0");
    expect_granted(x, "2", 1);
    h_expect_reply(a, "UNLOCK w3", "OK 0");
    expect_granted(x, "4", 1);
    h_expect_reply(a, "UNLOCK w0", "OK 0");
    expect_granted(x, "5", 1);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* max_waiters (all connections) counts them too. */
START_TEST(waiters_counts_tagged) {
    h_redis_start();
    int d = h_dlockd_start("[lock]\nmax_waiters = 2\n");
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    lock_all(a, "w", 3);
    h_send(x, "#0 LOCK w0\n#1 LOCK w1\n#2 LOCK w2\n");
    H_EXPECT(x, "#2 ERR LIMIT max_waiters reached");
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK w0", "OK 0");
    expect_granted(x, "0", 1);
    h_send(x, "#2 LOCK w2\n");
    h_await_waiters(adm, 2);
    h_expect_reply(a, "UNLOCK w2", "OK 0");
    expect_granted(x, "2", 1);
    h_expect_reply(a, "UNLOCK w1", "OK 0");
    expect_granted(x, "1", 1);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* EXISTS over dlock:<prefix>0 .. n-1: how many Redis holds. */
static long long keys_held(const char *prefix, int n) {
    char cmd[512];
    size_t k = (size_t)snprintf(cmd, sizeof(cmd), "EXISTS");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " dlock:%s%d", prefix, i);
    return strtoll(h_redis_cli("%s", cmd), NULL, 10);
}

/* Waits (H_WAIT_MS) until Redis holds want of them: releases of grants
 * refused past a limit are sent after the refusal. */
static void await_keys_held(const char *prefix, int n, long long want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (keys_held(prefix, n) != want) {
        ck_assert_msg(h_now_ms() < end, "%lld of %s0..%d held in Redis, want %lld",
                      keys_held(prefix, n), prefix, n - 1, want);
        usleep(10000);
    }
}

/* One connection's tagged LOCKs all in flight at once are bound by
 * max_locks_per_uid and max_locks_per_client: the limit's worth granted,
 * the rest refused (their grants released in Redis). */
static void locks_bound(const char *conf, const char *prefix, const char *refusal) {
    enum { N = 6, LIMIT = 3 };
    int d = h_dlockd_start(conf);
    h_conn_t *x = h_connect_index(d), *adm = h_connect_index(d);
    for (int i = 0; i < N; i++) h_send(x, "#%d LOCK %s%d\n", i, prefix, i);
    int granted = 0, refused = 0, held[N] = {0};
    for (int i = 0; i < N; i++) {
        const char *l = h_recv(x, H_WAIT_MS);
        int tag = -1, n = 0;
        ck_assert_msg(l != NULL && sscanf(l, "#%d %n", &tag, &n) == 1 && tag >= 0 && tag < N,
                      "reply %d: '%s'", i, l ? l : "(nothing)");
        if (strncmp(l + n, "OK ", 3) == 0) {
            granted++;
            held[tag] = 1;
        } else {
            ck_assert_msg(strcmp(l + n, refusal) == 0, "got '%s', wanted '#%d %s'", l, tag,
                          refusal);
            refused++;
        }
    }
    ck_assert_int_eq(granted, LIMIT);
    ck_assert_int_eq(refused, N - LIMIT);
    ck_assert_int_eq(h_info_value(adm, "locks_held"), LIMIT);
    await_keys_held(prefix, N, LIMIT);
    h_send(x, "#9 LOCK %s9\n", prefix);
    char want[128];
    snprintf(want, sizeof(want), "#9 %s", refusal);
    H_EXPECT(x, want);
    int one = 0;
    while (!held[one]) one++;
    h_send(x, "#u UNLOCK %s%d\n", prefix, one);
    H_EXPECT(x, "#u OK 0");
    h_send(x, "#9 LOCK %s9\n", prefix);
    expect_granted(x, "9", 1);
    h_close(adm);
    h_close(x);
}

START_TEST(locks_per_uid_counts_tagged) {
    h_redis_start();
    locks_bound("[server]\nmax_locks_per_uid = 3\n[redis]\ncommand_timeout_ms = 15000\n", "pu",
                "ERR LIMIT max_locks_per_uid reached");
}
END_TEST

START_TEST(locks_per_client_counts_tagged) {
    h_redis_start();
    locks_bound("[lock]\nmax_locks_per_client = 3\n", "pc",
                "ERR LIMIT max_locks_per_client reached");
}
END_TEST

/* ---- attackers --------------------------------------------------------------------------- */

/* A client with 100 tagged waits that stops reading until it passes
 * max_output is closed: its waits go, the others' do not. */
START_TEST(nonreader_with_waits_closed) {
    enum { N = 100 };
    h_redis_start();
    int d = h_dlockd_start("[server]\nmax_output = 4096\n");
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *v = h_connect_index(d),
             *b = h_connect_index(d);
    lock_all(a, "n", N);
    for (int i = 0; i < N; i++) h_send(x, "#%d LOCK n%d\n", i, i);
    h_await_waiters(b, N);
    h_send(v, "#v LOCK n0\n"); /* behind x's wait for n0 */
    h_await_waiters(b, N + 1);
    char pings[5 * 500];
    for (size_t i = 0; i < sizeof(pings); i += 5) memcpy(pings + i, "PING\n", 5);
    long long end = h_now_ms() + H_WAIT_MS;
    int closed = 0;
    while (!closed) {
        ck_assert_msg(h_now_ms() < end, "the daemon kept a client that does not read");
        ssize_t n = write(x->fd, pings, sizeof(pings));
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) closed = 1;
    }
    h_close(x);
    ck_assert_int_eq(h_info_value(b, "output_overflows"), 1);
    h_await_waiters(b, 1); /* v's */
    for (int i = 0; i < N; i++) h_send(a, "UNLOCK n%d\n", i);
    for (int i = 0; i < N; i++) H_EXPECT(a, "OK 0");
    expect_granted(v, "v", 1);
    for (int i = 1; i < N; i++) h_send(b, "STATUS n%d\n", i);
    for (int i = 1; i < N; i++) H_EXPECT(b, "OK FREE");
    h_send(b, "STATUS n0\n");
    H_EXPECT_PREFIX(b, "OK TAKEN ");
    ck_assert_int_eq(h_info_value(b, "waiters"), 0);
    ck_assert_int_eq(h_info_value(b, "locks_held"), 1);
    h_close(b);
    h_close(v);
    h_close(a);
}
END_TEST

/* A client that closes with 50 tagged waits in flight, 25 queued behind
 * another's holds and 25 in Redis, and two LISTs: every name is free
 * after, and INFO's waiters back to 0. */
START_TEST(close_with_waits_in_flight) {
    enum { N = 25 };
    h_redis_start();
    int d = h_dlockd_start("[redis]\ncommand_timeout_ms = 15000\n");
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    lock_all(a, "q", N);
    for (int i = 0; i < N; i++) h_send(x, "#q%d LOCK q%d\n", i, i);
    h_await_waiters(b, N);
    /* Redis runs none of the next 25 until x is gone */
    ck_assert_str_eq(h_redis_cli("CLIENT PAUSE 20000 WRITE"), "OK");
    for (int i = 0; i < N; i++) h_send(x, "#r%d LOCK r%d\n", i, i);
    h_await_waiters(b, 2 * N);
    h_send(x, "#L LIST * 1000\n#l LIST q* 10\n"); /* reads in flight too */
    h_close(x);
    h_await_waiters(b, 0);
    ck_assert_str_eq(h_redis_cli("CLIENT UNPAUSE"), "OK");
    for (int i = 0; i < N; i++) h_send(a, "UNLOCK q%d\n", i);
    for (int i = 0; i < N; i++) H_EXPECT(a, "OK 0");
    for (int i = 0; i < N; i++) h_send(b, "STATUS q%d\n", i);
    for (int i = 0; i < N; i++) H_EXPECT(b, "OK FREE");
    /* the grants Redis made x in its pause are undone */
    for (int i = 0; i < N; i++) h_send(b, "TRYLOCK r%d %d\n", i, H_WAIT_MS);
    for (int i = 0; i < N; i++) H_EXPECT_PREFIX(b, "OK ");
    for (int i = 0; i < N; i++) h_send(b, "UNLOCK r%d\n", i);
    for (int i = 0; i < N; i++) H_EXPECT(b, "OK 0");
    ck_assert_int_eq(h_info_value(b, "waiters"), 0);
    ck_assert_int_eq(h_info_value(b, "locks_held"), 0);
    await_keys_held("q", N, 0);
    await_keys_held("r", N, 0);
    h_close(b);
    h_close(a);
}
END_TEST

/* utime + stime of pid, in clock ticks. */
static long cpu_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    long utime = 0, stime = 0;
    ck_assert_ptr_nonnull(p);
    /* fields after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
                            &utime, &stime), 2);
    return utime + stime;
}

/* One client's max_inflight 64-name MLOCKs, each sharing a name with the
 * one before it only (a chain, all but the first waiting their turn),
 * then requests that end and let parked ones look again: the daemon's
 * work stays small, and another client is answered meanwhile; then the
 * chain unwinds in order. Telling
 * which earlier request shares a name compared every name of every
 * earlier request (1023 x 1023 / 2 x 64 x 64 name comparisons for the
 * chain, again at each end): a few hundred kB stalled every client for
 * seconds. */
START_TEST(parked_chain_costs_little) {
    enum { N = 1023, NAMES = 64, TRIES = 3 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    pid_t pid = h_dlockd_pid(d);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *o = h_connect_index(d);
    h_send(a, "LOCK H0000000x\n");
    H_EXPECT_PREFIX(a, "OK ");
    /* names of one length (9), told apart by their last bytes */
    size_t cap = (size_t)N * (NAMES * 10 + 32);
    char *burst = malloc(cap);
    ck_assert_ptr_nonnull(burst);
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        len += (size_t)snprintf(burst + len, cap - len, "#m%d MLOCK %d", i, NAMES);
        for (int j = 0; j < NAMES - 2; j++)
            len += (size_t)snprintf(burst + len, cap - len, " u%05d%03d", i, j);
        if (i == 0) len += (size_t)snprintf(burst + len, cap - len, " H0000000x");
        else len += (size_t)snprintf(burst + len, cap - len, " L%08d", i - 1);
        len += (size_t)snprintf(burst + len, cap - len, " L%08d\n", i);
    }
    long t0 = cpu_ticks(pid);
    h_send_raw(x, burst, len);
    free(burst);
    h_send(x, "#p PING\n");
    const char *l = h_recv(x, 50000); /* not the bound: the CPU below is */
    ck_assert_msg(l != NULL && strcmp(l, "#p OK PONG") == 0, "got '%s'", l ? l : "nothing");
    for (int k = 0; k < TRIES; k++) {
        h_send(x, "#z TRYLOCK free%d 0\n", k); /* ends: the parked look again */
        h_expect_reply(o, "PING", "OK PONG");
        l = h_recv(x, 50000);
        ck_assert_msg(l != NULL && strncmp(l, "#z OK ", 6) == 0, "got '%s'", l ? l : "nothing");
    }
    double cpu = (double)(cpu_ticks(pid) - t0) / (double)sysconf(_SC_CLK_TCK);
    ck_assert_msg(cpu < 2.0, "%.2f s of CPU for one client's %d MLOCKs and %d ends", cpu, N,
                  TRIES);
    /* The chain unwinds in order, each MLOCK once the one before it is
     * answered: granted (the name shared with the one before re-entered)
     * until max_locks_per_client, refused after. */
    h_expect_reply(a, "UNLOCK H0000000x", "OK 0");
    int granted = 0;
    for (int i = 0; i < N; i++) {
        char tag[16];
        int n = snprintf(tag, sizeof(tag), "#m%d ", i);
        l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL && strncmp(l, tag, (size_t)n) == 0, "MLOCK %d: got '%s'", i,
                      l ? l : "nothing");
        if (strncmp(l + n, "OK ", 3) == 0) {
            ck_assert_msg(granted == i, "'%s' after a refusal", l);
            granted++;
        } else {
            ck_assert_msg(strcmp(l + n, "ERR LIMIT max_locks_per_client reached") == 0, "'%s'",
                          l);
        }
    }
    ck_assert_int_ge(granted, 1);
    h_close(o);
    h_close(x);
    h_close(a);
}
END_TEST

/* A grant racing CANCEL #7 (the holder's release and the CANCEL sent at
 * once): either #7 OK then OK 0, the lock held, or #7 ERR CANCELLED then
 * OK 1, not held. Never both, never neither. */
START_TEST(grant_races_cancel) {
    enum { ROUNDS = 40 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    pid_t pid = h_dlockd_pid(d);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *adm = h_connect_index(d);
    int granted = 0, cancelled = 0;
    h_send(a, "LOCK r\n");
    H_EXPECT_PREFIX(a, "OK ");
    for (int round = 0; round < ROUNDS; round++) {
        h_send(x, "#7 LOCK r\n");
        h_await_waiters(adm, 1);
        switch (round % 4) {
        case 0: /* in one loop pass of the daemon */
            kill(pid, SIGSTOP);
            h_send(a, "UNLOCK r\n");
            h_send(x, "CANCEL #7\n");
            kill(pid, SIGCONT);
            break;
        case 1: /* the CANCEL right behind the release */
            h_send(a, "UNLOCK r\n");
            h_send(x, "CANCEL #7\n");
            break;
        case 2: /* once the release is answered: the grant's acquire is in Redis */
            h_send(a, "UNLOCK r\n");
            H_EXPECT(a, "OK 0");
            h_send(x, "CANCEL #7\n");
            break;
        default: /* and one more round trip later: Redis may have answered */
            h_send(a, "UNLOCK r\n");
            H_EXPECT(a, "OK 0");
            h_expect_reply(adm, "PING", "OK PONG");
            h_send(x, "CANCEL #7\n");
            break;
        }
        if (round % 4 < 2) H_EXPECT(a, "OK 0");
        const char *l = h_recv(x, H_WAIT_MS);
        ck_assert_msg(l != NULL, "round %d: no answer to #7", round);
        if (strncmp(l, "#7 OK ", 6) == 0) {
            H_EXPECT(x, "OK 0");
            h_send(x, "#s STATUS r\n");
            expect_prefix(x, "#s OK MINE 1 ", "granted: held");
            h_expect_reply(x, "UNLOCK r", "OK 0");
            granted++;
        } else {
            ck_assert_msg(strcmp(l, "#7 ERR CANCELLED the wait was cancelled") == 0,
                          "round %d: '%s'", round, l);
            H_EXPECT(x, "OK 1");
            cancelled++;
        }
        h_expect_reply(x, "#p PING", "#p OK PONG"); /* nothing more of #7 */
        /* a's LOCK is granted: x does not hold r */
        h_send(a, "LOCK r\n");
        H_EXPECT_PREFIX(a, "OK ");
        h_send(x, "#s STATUS r\n");
        expect_prefix(x, "#s OK TAKEN ", "r is a's again");
    }
    fprintf(stderr, "grant_races_cancel: %d granted first, %d cancelled\n", granted, cancelled);
    ck_assert_int_eq(granted + cancelled, ROUNDS);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    h_close(adm);
    h_close(x);
    h_close(a);
}
END_TEST

/* The peer shuts its writing side with tagged waits in flight: every one
 * is answered, then the daemon closes. An untagged request parked behind
 * a tagged one too. */
START_TEST(eof_answers_every_tagged_wait) {
    enum { N = 10 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *x = h_connect_index(d), *b = h_connect_index(d);
    lock_all(a, "e", N);
    for (int i = 0; i < N; i++) h_send(x, "#%d LOCK e%d\n", i, i);
    h_send(x, "#p PING\n");
    ck_assert_int_eq(shutdown(x->fd, SHUT_WR), 0);
    H_EXPECT(x, "#p OK PONG");
    h_await_waiters(b, N);
    for (int i = N - 1; i >= 0; i--) {
        h_send(a, "UNLOCK e%d\n", i);
        H_EXPECT(a, "OK 0");
        char tag[4];
        snprintf(tag, sizeof(tag), "%d", i);
        expect_granted(x, tag, 1);
    }
    ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
    h_close(x);
    for (int i = 0; i < N; i++) h_send(b, "TRYLOCK e%d %d\n", i, H_WAIT_MS);
    for (int i = 0; i < N; i++) H_EXPECT_PREFIX(b, "OK ");

    /* an untagged UNLOCK parked behind #1 at the EOF */
    x = h_connect_index(d);
    h_send(x, "#1 LOCK e0\nUNLOCK e0\n");
    ck_assert_int_eq(shutdown(x->fd, SHUT_WR), 0);
    h_await_waiters(b, 1);
    h_expect_reply(b, "UNLOCK e0", "OK 0");
    expect_granted(x, "1", 1);
    H_EXPECT(x, "OK 0");
    ck_assert_int_eq(h_eof(x, H_WAIT_MS), 1);
    h_close(x);
    h_close(b);
    h_close(a);
}
END_TEST

/* One test case per part of the rules, so that CK_RUN_CASE runs one. */
static TCase *tcase(Suite *s, const char *name) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *suite(void) {
    Suite *s = suite_create("tags");
    TCase *tc = tcase(s, "replies");
    tcase_add_test(tc, tagged_replies_carry_the_tag);
    tcase_add_test(tc, grants_follow_releases);
    tc = tcase(s, "untagged");
    tcase_add_test(tc, untagged_wait_stops_reading);
    tcase_add_test(tc, bare_cancel_look_ahead);
    tc = tcase(s, "order");
    tcase_add_test(tc, one_name_in_order);
    tcase_add_test(tc, mlock_shares_a_name_in_order);
    tcase_add_test(tc, two_tags_reenter);
    tcase_add_test(tc, elect_in_order_events_untagged);
    tc = tcase(s, "cancel");
    tcase_add_test(tc, cancel_tag_withdraws_a_wait);
    tcase_add_test(tc, cancel_tag_not_a_wait);
    tcase_add_test(tc, cancel_one_of_twenty);
    tcase_add_test(tc, cancel_parked);
    tc = tcase(s, "list");
    tcase_add_test(tc, tagged_list_block_whole);
    tc = tcase(s, "bad_input");
    tcase_add_test(tc, malformed_tags);
    tcase_add_test(tc, tag_in_use);
    tcase_add_test(tc, max_inflight);
    tcase_add_test(tc, tagged_errors_keep_the_tag);
    tcase_add_test(tc, tagged_line_too_long);
    tcase_add_test(tc, quit_withdraws_tagged_waits);
    tc = tcase(s, "limits");
    tcase_add_test(tc, waiters_per_uid_counts_tagged);
    tcase_add_test(tc, waiters_counts_tagged);
    tcase_add_test(tc, locks_per_uid_counts_tagged);
    tcase_add_test(tc, locks_per_client_counts_tagged);
    tc = tcase(s, "attackers");
    tcase_add_test(tc, nonreader_with_waits_closed);
    tcase_add_test(tc, close_with_waits_in_flight);
    tcase_add_test(tc, grant_races_cancel);
    tcase_add_test(tc, eof_answers_every_tagged_wait);
    tc = tcase(s, "stall");
    tcase_add_test(tc, parked_chain_costs_little);
    return s;
}

int main(void) {
    return h_main(suite());
}
