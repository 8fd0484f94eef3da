/* Integration-test harness: real redis-server and dlockd processes on
 * temporary paths, line clients, and cleanup that always happens.
 * SPDX-License-Identifier: MIT
 *
 * Every process started here gets PR_SET_PDEATHSIG, so a test killed by a
 * timeout takes its servers with it; h_main() removes the run's temporary
 * directory at exit. Use h_setup/h_teardown as checked fixtures. */
#ifndef DLOCK_HARNESS_H
#define DLOCK_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#define H_MAX_PROCS     16
#define H_LINE_MAX      8192
#define H_WAIT_MS       10000   /* generous bound for anything to happen */

typedef struct h_conn_s {
    int fd;
    char buf[H_LINE_MAX];
    size_t len;
    char line[H_LINE_MAX];      /* the last line returned by h_recv */
} h_conn_t;

/* Runs the suite with CK_FORK and returns the process exit code. */
int h_main(Suite *s);

void h_setup(void);
void h_teardown(void);
const char *h_dir(void);        /* this test's private directory */

/* redis-server on a Unix socket in h_dir(), without persistence. */
void h_redis_start(void);
/* Same, with extra redis-server arguments (NULL-terminated, may be NULL),
 * e.g. {"--requirepass", "pw", NULL}; a --requirepass is used to check
 * readiness. */
void h_redis_start_args(const char *const extra[]);
void h_redis_stop(int sig);     /* signal, then wait for it to exit */
void h_redis_signal(int sig);   /* only signal (SIGSTOP, SIGCONT) */
const char *h_redis_sock(void);
/* Runs one redis command (words separated by spaces) with redis-cli and
 * returns its first output line (static buffer). */
const char *h_redis_cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* More redis-servers, several at once, each with an index: on TCP at
 * 127.0.0.1:port (port 0: a free one, tried again if another process takes
 * it first), and on a Unix socket of its own that the harness uses to see
 * it ready. extra as for h_redis_start_args. */
int h_redis_start_tcp(int port, const char *const extra[]);
/* A TLS-only redis-server (--port 0 --tls-port) with the files that
 * h_tls_make_certs(certs) made; auth_clients: require a client certificate
 * (--tls-auth-clients yes). port as for h_redis_start_tcp. */
int h_redis_start_tls(int port, const char *certs, int auth_clients);
int h_redis_port(int index);
/* Its Unix socket (plain, even for a TLS-only server). */
const char *h_redis_sock_index(int index);
/* As h_redis_stop and h_redis_signal, for a server started by index. */
void h_redis_stop_index(int index, int sig);
void h_redis_signal_index(int index, int sig);

/* A TCP port of 127.0.0.1 that was free a moment ago (bound to port 0,
 * read back, closed). */
int h_free_port(void);

/* Makes, in dir, with the openssl command: ca.crt/ca.key, a CA;
 * server.crt/server.key signed by it (CN localhost, subjectAltName
 * IP:127.0.0.1 and DNS:localhost); client.crt/client.key signed by it (for
 * client authentication); other-ca.crt/other-ca.key, an unrelated CA. */
void h_tls_make_certs(const char *dir);

/* A dlockd using h_redis_sock(); extra is appended to its config file
 * (e.g. "[lock]\nlease_ms = 300\n"), may be NULL. Returns its index. */
int h_dlockd_start(const char *extra);
/* Same, listening on sock (NULL: a fresh path in h_dir()). */
int h_dlockd_start_at(const char *sock, const char *extra);
/* Starts dlockd with conf_text as its whole config file and waits until it
 * answers PING (not for Redis). Returns its index. */
int h_dlockd_start_conf(const char *conf_text);
/* Starts dlockd with conf_text as its whole config file, without waiting
 * for it to be ready. Returns its pid. */
pid_t h_dlockd_spawn(const char *conf_text, const char *sock, int *index);
const char *h_dlockd_sock(int index);
/* Waits until dlockd's INFO says redis=up (up = 1) or redis=down. */
void h_await_redis(int index, int up);
pid_t h_dlockd_pid(int index);
/* Signals it and waits; returns the exit status as from waitpid, or -1 on timeout. */
int h_dlockd_stop(int index, int sig);
/* The path of a process's stderr log. */
const char *h_dlockd_log(int index);
/* The path of a dlockd's config file (to change it before a SIGHUP). */
const char *h_dlockd_conf(int index);
/* Lines of a dlockd's log that contain text. */
int h_log_count(int index, const char *text);
/* Waits (up to H_WAIT_MS) until the log has at least want such lines. */
void h_await_log(int index, const char *text, int want);

/* Clients. */
h_conn_t *h_connect(const char *sock);
h_conn_t *h_connect_index(int dlockd);
void h_send(h_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void h_send_raw(h_conn_t *c, const void *data, size_t len);
/* The next line without its LF, or NULL on timeout or EOF. */
const char *h_recv(h_conn_t *c, int timeout_ms);
/* 1 if the peer closed (EOF) within timeout_ms, with nothing else sent. */
int h_eof(h_conn_t *c, int timeout_ms);
void h_close(h_conn_t *c);

/* Sends one request line to dlockd index as user uid (from a child that
 * drops root) and returns the reply line (static buffer). The socket must
 * let that user connect (socket_mode 0666). */
const char *h_request_as(int index, uid_t uid, const char *request);

/* Monotonic milliseconds and microseconds. */
long long h_now_ms(void);
long long h_now_us(void);

#define H_EXPECT(c, want) do {                                   \
        const char *got_ = h_recv((c), H_WAIT_MS);               \
        ck_assert_msg(got_ != NULL, "no reply, wanted '%s'", (want)); \
        ck_assert_str_eq(got_, (want));                          \
    } while (0)

#define H_EXPECT_PREFIX(c, want) do {                            \
        const char *got_ = h_recv((c), H_WAIT_MS);               \
        ck_assert_msg(got_ != NULL, "no reply, wanted '%s...'", (want)); \
        ck_assert_msg(strncmp(got_, (want), strlen(want)) == 0,  \
                      "got '%s', wanted '%s...'", got_, (want)); \
    } while (0)

#endif
