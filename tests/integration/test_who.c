/* Integration tests: WHO names a lock's holder, here and from another dlockd.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"

START_TEST(who_names_the_holder) {
    char want[512], host[256];
    h_redis_start();
    int d1 = h_dlockd_start(NULL), d2 = h_dlockd_start(NULL);
    ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
    host[sizeof(host) - 1] = '\0';
    h_conn_t *a = h_connect_index(d1), *q1 = h_connect_index(d1), *q2 = h_connect_index(d2);

    h_send(q1, "WHO w\n");
    H_EXPECT(q1, "OK FREE");
    h_send(a, "LOCK w\n");
    H_EXPECT_PREFIX(a, "OK ");

    /* Asked of the holder's own dlockd: its host and pid, and the client's
     * pid and uid (this process, root). */
    h_send(q1, "WHO w\n");
    const char *l = h_recv(q1, H_WAIT_MS);
    long long ttl;
    char rest[400];
    ck_assert_msg(l != NULL && sscanf(l, "OK HELD %lld %399[^\n]", &ttl, rest) == 2,
                  "WHO w on the holder's dlockd: '%s'", l ? l : "(none)");
    snprintf(want, sizeof(want), "%s %d %d 0", host, (int)h_dlockd_pid(d1), (int)getpid());
    ck_assert_str_eq(rest, want);
    ck_assert_int_gt(ttl, 0);

    /* Asked of another dlockd: the holder's dlockd from the registry; the
     * client is not its to know. */
    h_send(q2, "WHO w\n");
    l = h_recv(q2, H_WAIT_MS);
    ck_assert_msg(l != NULL && sscanf(l, "OK HELD %lld %399[^\n]", &ttl, rest) == 2,
                  "WHO w on another dlockd: '%s'", l ? l : "(none)");
    snprintf(want, sizeof(want), "%s %d - -", host, (int)h_dlockd_pid(d1));
    ck_assert_str_eq(rest, want);

    /* dlock --who says the same. */
    char cmd[1024], out[512] = "";
    const char *dlock = getenv("DLOCK_BIN") ? getenv("DLOCK_BIN") : "build/dlock";
    snprintf(cmd, sizeof(cmd), "%s -S %s --who w", dlock, h_dlockd_sock(d2));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strncmp(out, "OK HELD ", 8) == 0 && strstr(out, want) != NULL,
                  "dlock --who w: '%s', wanted '... %s'", out, want);

    h_send(a, "UNLOCK w\n");
    H_EXPECT(a, "OK 0");
    /* UNLOCK answers before its release reaches Redis: wait for that. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(h_redis_cli("EXISTS dlock:w"), "0") != 0) {
        ck_assert_msg(h_now_ms() < end, "the release of w never reached Redis");
        usleep(2000);
    }
    h_send(q2, "WHO w\n");
    H_EXPECT(q2, "OK FREE");

    /* A holder no dlockd registered (a Redisson client): nothing known but
     * its TTL. */
    ck_assert_str_eq(h_redis_cli("HSET dlock:r 0b1e7b9c-0000-4000-8000-000000000001:7 1"), "1");
    h_send(q2, "WHO r\n");
    H_EXPECT(q2, "OK HELD -1 - - - -");

    /* Wrong use is an error like any other. */
    h_send(q2, "WHO\n");
    H_EXPECT_PREFIX(q2, "ERR ARGS");
    h_close(a);
    h_close(q1);
    h_close(q2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("who");
    TCase *tc = tcase_create("who");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_add_test(tc, who_names_the_holder);
    suite_add_tcase(s, tc);
    return h_main(s);
}
