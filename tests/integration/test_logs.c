/* Integration tests of what dlockd logs: a failure that repeats is said
 * once, summed up once a period while it lasts and ended with one line;
 * clients that held locks say when they go, with their pid and uid; lost
 * locks name their holder.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* The summary period the daemons of this suite run with
 * (DLOCKD_LOG_SUMMARY_MS, set in main): longer than the reconnect backoff's
 * 1000 ms, so that a summary sums up more than one try. */
#define PERIOD_MS 1500

/* What a log says about one repeated failure. */
typedef struct run_s {
    int firsts;              /* warn or error lines that are no summary */
    int first_errors;        /* ... of them at error level */
    int summaries;
    long long summed;        /* occurrences the summaries counted */
    double shortest_s;       /* the shortest "in the last S s" */
    int backs;               /* "is back after" lines */
    long long back_total;    /* failures the last of them counted */
    int tries;               /* resp's debug lines, one per failed try */
} run_t;

/* Reads dlockd index's log for the connection named role ("command" or
 * "pubsub"): node.c's lines "redis <role> connection to <label> ..." and
 * resp.c's debug lines "<role> <label>: down: ...". */
static run_t read_run(int index, const char *role, const char *label) {
    run_t r = {.shortest_s = 1e9};
    char node_key[512], resp_key[512], line[4096];
    snprintf(node_key, sizeof(node_key), "redis %s connection to %s", role, label);
    snprintf(resp_key, sizeof(resp_key), " %s %s: down: ", role, label);
    FILE *f = fopen(h_dlockd_log(index), "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, resp_key) != NULL && strstr(line, " debug: ") != NULL) r.tries++;
        if (strstr(line, node_key) == NULL) continue;
        const char *rep = strstr(line, ": repeated ");
        const char *back = strstr(line, " is back after ");
        if (rep != NULL) {
            long long n;
            double s;
            ck_assert_msg(sscanf(rep, ": repeated %lld time%*[s] in the last %lf s", &n, &s) == 2 ||
                              sscanf(rep, ": repeated %lld time in the last %lf s", &n, &s) == 2,
                          "unreadable summary: %s", line);
            r.summaries++;
            r.summed += n;
            if (s < r.shortest_s) r.shortest_s = s;
        } else if (back != NULL) {
            const char *p = strchr(back, '(');
            ck_assert_msg(p != NULL, "unreadable: %s", line);
            r.backs++;
            r.back_total = atoll(p + 1);
        } else if (strstr(line, " warn: ") != NULL || strstr(line, " error: ") != NULL) {
            r.firsts++;
            if (strstr(line, " error: ") != NULL) r.first_errors++;
        }
    }
    fclose(f);
    return r;
}

/* The summaries of role's outage so far. */
static int summaries(int index, const char *role, const char *label) {
    return read_run(index, role, label).summaries;
}

/* Waits until role's outage has been summed up n times. */
static void await_summaries(int index, const char *role, const char *label, int n) {
    long long end = h_now_ms() + 4 * PERIOD_MS + n * PERIOD_MS;
    while (summaries(index, role, label) < n) {
        ck_assert_msg(h_now_ms() < end, "%s: %d summaries of the %s connection's outage, "
                      "wanted %d (see %s)", label, summaries(index, role, label), role, n,
                      h_dlockd_log(index));
        usleep(20000);
    }
}

/* One outage of role's connection, over: one first line, summaries a
 * period apart that count every try but the first and the last few, and
 * one line saying it is back with all of them. */
static void check_run(int index, const char *role, const char *label, int error_level,
                      int min_summaries) {
    run_t r = read_run(index, role, label);
    const char *log = h_dlockd_log(index);
    ck_assert_msg(r.firsts == 1, "%s connection: %d first lines, wanted 1 (see %s)", role,
                  r.firsts, log);
    ck_assert_msg(r.first_errors == (error_level ? 1 : 0), "%s connection: the first line "
                  "at the wrong level (see %s)", role, log);
    ck_assert_msg(r.summaries >= min_summaries, "%s connection: %d summaries (see %s)", role,
                  r.summaries, log);
    ck_assert_msg(r.shortest_s >= PERIOD_MS / 1000.0 - 0.05, "%s connection: summaries "
                  "%.1f s apart, the period is %d ms (see %s)", role, r.shortest_s, PERIOD_MS,
                  log);
    ck_assert_msg(r.backs == 1, "%s connection: %d lines saying it is back (see %s)", role,
                  r.backs, log);
    ck_assert_msg(r.tries >= 3, "%s connection: only %d tries (see %s)", role, r.tries, log);
    ck_assert_msg(r.back_total == r.tries, "%s connection: back after %lld failures, the "
                  "log has %d tries (see %s)", role, r.back_total, r.tries, log);
    /* The first line says one, the summaries the others but those after
     * the last summary: at most one period's worth at one try a second. */
    long long unsaid = r.tries - 1 - r.summed;
    ck_assert_msg(unsaid >= 0 && unsaid <= PERIOD_MS / 1000 + 1, "%s connection: %d tries, "
                  "1 first line and %lld summed up (see %s)", role, r.tries, r.summed, log);
}

static void redis_cli_auth(const char *password, const char *cmd) {
    char line[1024];
    snprintf(line, sizeof(line), "redis-cli -s '%s' -a '%s' --no-auth-warning %s >/dev/null",
             h_redis_sock(), password, cmd);
    ck_assert_int_eq(system(line), 0);
}

START_TEST(wrong_password_is_said_once_summed_up_and_ended) {
    const char *const pw[] = {"--requirepass", "right-pw", NULL};
    h_redis_start_args(pw);
    char conf[1024], label[600];
    snprintf(conf, sizeof(conf),
             "[server]\nlog_level = debug\n"
             "[redis]\nurl = unix://%s\npassword = dlockd-pw\nconnect_timeout_ms = 500\n",
             h_redis_sock());
    snprintf(label, sizeof(label), "unix:%s db 0", h_redis_sock());
    int d = h_dlockd_start_conf(conf);
    h_await_log(d, "handshake failed: WRONGPASS", 2);
    await_summaries(d, "command", label, 2);
    await_summaries(d, "pubsub", label, 2);
    /* The password Redis wants becomes the daemon's: the outage ends. */
    redis_cli_auth("right-pw", "CONFIG SET requirepass dlockd-pw");
    h_await_redis(d, 1);
    h_await_log(d, " is back after ", 2);
    int later = summaries(d, "command", label);
    usleep((PERIOD_MS + 300) * 1000);
    ck_assert_int_eq(summaries(d, "command", label), later);
    check_run(d, "command", label, 1, 2);
    check_run(d, "pubsub", label, 1, 2);
    /* Said at error level, the first line and the summaries alike. */
    ck_assert_int_eq(h_log_count(d, "warn: redis "), 0);
}
END_TEST

START_TEST(refused_port_is_said_once_summed_up_and_ended) {
    int port = h_free_port();
    char conf[1024], label[64];
    snprintf(conf, sizeof(conf),
             "[server]\nlog_level = debug\n"
             "[redis]\nurl = redis://127.0.0.1:%d\nconnect_timeout_ms = 500\n", port);
    snprintf(label, sizeof(label), "127.0.0.1:%d db 0", port);
    int d = h_dlockd_start_conf(conf);
    await_summaries(d, "command", label, 2);
    await_summaries(d, "pubsub", label, 2);
    ck_assert_int_ge(h_log_count(d, "down: connection refused: repeated "), 4);
    h_redis_start_tcp(port, NULL);
    h_await_redis(d, 1);
    h_await_log(d, " is back after ", 2);
    check_run(d, "command", label, 0, 2);
    check_run(d, "pubsub", label, 0, 2);
}
END_TEST

/* Connects, expecting ERR LIMIT. */
static void refused(int d) {
    h_conn_t *c = h_connect_index(d);
    H_EXPECT_PREFIX(c, "ERR LIMIT ");
    h_close(c);
}

START_TEST(max_clients_is_said_once_summed_up_and_ended) {
    int d = h_dlockd_start("[server]\nmax_clients = 1\n");
    /* The harness's readiness check may still hold the one slot. */
    h_conn_t *holder = NULL;
    long long end = h_now_ms() + H_WAIT_MS;
    while (holder == NULL) {
        h_conn_t *c = h_connect_index(d);
        if (send(c->fd, "PING\n", 5, MSG_NOSIGNAL) != 5) {}
        const char *r = h_recv(c, H_WAIT_MS);
        if (r != NULL && strcmp(r, "OK PONG") == 0) holder = c;
        else h_close(c);
        ck_assert_msg(holder != NULL || h_now_ms() < end, "never accepted");
        if (holder == NULL) usleep(10000);
    }
    long long before = h_info_value(holder, "rejected");
    for (int i = 0; i < 3; i++) refused(d);
    h_await_log(d, "max_clients (1) reached: connections are refused", 1);
    ck_assert_int_eq(h_log_count(d, "max_clients (1) reached"), 1);
    /* A period later, the next refusal sums up all but the first. */
    usleep((PERIOD_MS + 200) * 1000);
    refused(d);
    char want[128];
    snprintf(want, sizeof(want), "max_clients (1) reached: connections are refused: "
             "repeated %lld times in the last ", before + 3);
    h_await_log(d, want, 1);
    ck_assert_int_eq(h_log_count(d, "max_clients (1) reached"), 2);
    long long total = h_info_value(holder, "rejected");
    ck_assert_int_eq(total, before + 4);
    /* A period without refusals, and a client taken: it is over. */
    h_close(holder);
    usleep((PERIOD_MS + 200) * 1000);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    snprintf(want, sizeof(want), "max_clients (1): accepting connections again; %lld refused in ",
             total);
    h_await_log(d, want, 1);
    ck_assert_int_eq(h_log_count(d, "max_clients (1) reached"), 2);
    h_close(c);
}
END_TEST

START_TEST(lock_holders_say_when_they_go_others_do_not) {
    h_redis_start();
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\n");
    char want[256];
    /* Health checks: PING, INFO, STATUS, a TRYLOCK that found it free. */
    h_conn_t *p = h_connect_index(d);
    h_send(p, "PING\nINFO\nSTATUS a\n");
    H_EXPECT(p, "OK PONG");
    H_EXPECT_PREFIX(p, "OK version=");
    H_EXPECT(p, "OK FREE");
    h_close(p);
    /* A holder of two locks. */
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\nLOCK b\nLOCK b\n");
    H_EXPECT_PREFIX(c, "OK ");
    H_EXPECT_PREFIX(c, "OK ");
    H_EXPECT_PREFIX(c, "OK ");
    h_close(c);
    /* The client number depends on the harness's checks: match after it. */
    snprintf(want, sizeof(want), "(pid %d uid 0) disconnected holding 2 locks; 3 grants, "
             "0 timeouts in ", (int)getpid());
    h_await_log(d, want, 1);
    /* Another user's: its uid. */
    const char *r = h_request_as(d, 65534, "LOCK u");
    ck_assert_msg(strncmp(r, "OK ", 3) == 0, "LOCK u as 65534: %s", r);
    h_await_log(d, "uid 65534) disconnected holding 1 lock; 1 grant, 0 timeouts in ", 1);
    /* A waiter, and one whose TRYLOCK timed out after waiting. */
    h_conn_t *holder = h_connect_index(d);
    h_send(holder, "LOCK w\n");
    H_EXPECT_PREFIX(holder, "OK ");
    h_conn_t *w = h_connect_index(d);
    h_send(w, "LOCK w\n");
    h_conn_t *t = h_connect_index(d);
    h_send(t, "TRYLOCK w 50\n");
    H_EXPECT_PREFIX(t, "TIMEOUT ");
    h_close(t);
    snprintf(want, sizeof(want), "(pid %d uid 0) disconnected holding 0 locks; 0 grants, "
             "1 timeout in ", (int)getpid());
    h_await_log(d, want, 1);
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(holder, "waiters") != 1) {
        ck_assert_msg(h_now_ms() < end, "LOCK w never waited");
        usleep(5000);
    }
    h_close(w);
    snprintf(want, sizeof(want), "(pid %d uid 0) disconnected holding 0 locks and waiting for "
             "one; 0 grants, 0 timeouts in ", (int)getpid());
    h_await_log(d, want, 1);
    h_close(holder);
    h_await_log(d, "disconnected holding 1 lock;", 2);
    /* Only those, at info level, and the connects of the three that held
     * a lock (said at their first grant); the health check, the waiter and
     * the TRYLOCK that timed out never held one; all at debug level. */
    ck_assert_int_eq(h_log_count(d, "info: client "), 8);
    ck_assert_int_eq(h_log_count(d, " disconnected "), 5);
    ck_assert_int_eq(h_log_count(d, " holds its first lock"), 3);
    snprintf(want, sizeof(want), "(pid %d uid 0) connected ", (int)getpid());
    ck_assert_int_eq(h_log_count(d, want), 2);
    ck_assert_int_eq(h_log_count(d, "uid 65534) connected "), 1);
    ck_assert_int_eq(h_log_count(d, " connected ("), 0);
}
END_TEST

START_TEST(lost_locks_name_their_holder) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK x 200\n");
    H_EXPECT_PREFIX(c, "OK ");
    H_EXPECT(c, "!LOST x expired");
    char want[128];
    snprintf(want, sizeof(want), "(pid %d uid 0) lost lock x: expired", (int)getpid());
    h_await_log(d, want, 1);
    /* Forced by an admin. */
    h_send(c, "LOCK y\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_conn_t *admin = h_connect_index(d);
    h_send(admin, "FORCEUNLOCK y\n");
    H_EXPECT_PREFIX(admin, "OK ");
    H_EXPECT(c, "!LOST y forced");
    snprintf(want, sizeof(want), "(pid %d uid 0) lost lock y: forced", (int)getpid());
    h_await_log(d, want, 1);
    h_close(admin);
    h_close(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("logs");
    TCase *tc = tcase_create("logs");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, wrong_password_is_said_once_summed_up_and_ended);
    tcase_add_test(tc, refused_port_is_said_once_summed_up_and_ended);
    tcase_add_test(tc, max_clients_is_said_once_summed_up_and_ended);
    tcase_add_test(tc, lock_holders_say_when_they_go_others_do_not);
    tcase_add_test(tc, lost_locks_name_their_holder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    char period[16];
    snprintf(period, sizeof(period), "%d", PERIOD_MS);
    setenv("DLOCKD_LOG_SUMMARY_MS", period, 1); /* the daemons inherit it */
    return h_main(suite());
}
