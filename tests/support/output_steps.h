/* Steps for tests of max_output: a client's queue of replies filled to a chosen byte, and its close seen.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TESTS_OUTPUT_STEPS_H
#define DLOCK_TESTS_OUTPUT_STEPS_H

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define OUT_PONG_LEN 8      /* "OK PONG\n" */
#define OUT_PING_BATCH 256  /* PINGs sent at once while the kernel still takes replies */

/* Waits until the daemon behind adm has read and answered every request
 * sent so far: INFO's requests= (which counts adm's own INFOs too) reaches
 * base + sent + the INFOs asked; then one more round trip, so that the
 * flush that followed the last answer (same loop pass) is done too.
 * *infos counts the INFOs asked. */
static inline void out_await_requests(h_conn_t *adm, long long base, long long sent,
                                      long long *infos) {
    long long end = h_now_ms() + H_WAIT_MS, got;
    while ((got = h_info_value(adm, "requests")) < base + sent + ++*infos) {
        ck_assert_msg(h_now_ms() < end, "requests=%lld, wanted %lld", got, base + sent + *infos);
        usleep(1000);
    }
    h_info_value(adm, "requests");
    ++*infos;
}

/* Makes the daemon hold between left - 7 and left bytes short of
 * max_output of replies for c (c must read nothing from now on, and have
 * nothing in flight): PINGs pipelined until the kernel's buffers are full
 * (the replies it holds are FIONREAD on c), then as many as the queue can
 * take. A reply or event longer than left then overflows c's output; a
 * PONG does not. adm is another connection to the same daemon. Returns
 * the bytes queued in the daemon. */
static inline long long out_fill(h_conn_t *c, h_conn_t *adm, long long max_output,
                                 long long left) {
    char pings[OUT_PING_BATCH * 5];
    for (size_t i = 0; i < sizeof(pings); i += 5) memcpy(pings + i, "PING\n", 5);
    ck_assert_int_ge(left, OUT_PONG_LEN);
    ck_assert_int_le(OUT_PING_BATCH * OUT_PONG_LEN, max_output - left);
    long long base = h_info_value(adm, "requests"), infos = 0, sent = 0, queued = 0;
    long long n = OUT_PING_BATCH;
    for (;;) {
        h_send_raw(c, pings, (size_t)n * 5);
        sent += n;
        out_await_requests(adm, base, sent, &infos);
        int inq = 0;
        ck_assert_int_eq(ioctl(c->fd, FIONREAD, &inq), 0);
        queued = sent * OUT_PONG_LEN - inq;
        ck_assert_msg(queued <= max_output, "%lld bytes queued past max_output %lld", queued,
                      max_output);
        if (queued == 0) continue; /* the kernel still takes them all */
        /* Full: each PING from now on adds its PONG to the queue. */
        long long room = max_output - queued;
        if (room <= left) break;
        n = (room - left + OUT_PONG_LEN - 1) / OUT_PONG_LEN;
        if (n > OUT_PING_BATCH) n = OUT_PING_BATCH;
    }
    ck_assert_int_ge(max_output - queued, left - (OUT_PONG_LEN - 1));
    return queued;
}

/* Waits until INFO on adm counts want output_overflows (c is closed past
 * max_output: c must not read before, which would make room), then
 * reads and drops whatever c has until the daemon's close (EOF or a
 * reset). */
static inline void out_await_overflowed(h_conn_t *c, h_conn_t *adm, long long want,
                                        const char *what) {
    char buf[65536];
    long long end = h_now_ms() + H_WAIT_MS, got;
    while ((got = h_info_value(adm, "output_overflows")) < want) {
        ck_assert_msg(h_now_ms() < end, "%s: output_overflows=%lld, wanted %lld", what, got, want);
        usleep(1000);
    }
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        ck_assert_msg(h_now_ms() < end, "%s: the daemon kept the connection", what);
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno == ECONNRESET)) break;
    }
    c->len = 0;
}

#endif
