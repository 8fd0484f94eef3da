/* Tests of libdlock, the C client library, against a real dlockd.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/c/dlock.h"
#include "tests/support/harness.h"

static int daemon_idx;

static void setup(void) {
    h_setup();
    h_redis_start();
    daemon_idx = h_dlockd_start(NULL);
    setenv("DLOCK_SOCKET", h_dlockd_sock(daemon_idx), 1);
}

static dlock_t *open_client(void) {
    int err = 0;
    dlock_t *d = dlock_connect(NULL, &err); /* from $DLOCK_SOCKET */
    ck_assert_msg(d != NULL, "connect: %s", dlock_strerror(err));
    return d;
}

START_TEST(lock_reenter_unlock) {
    dlock_t *d = open_client();
    uint64_t f1 = 0, f2 = 0;
    uint32_t holds = 0, left = 9;
    ck_assert_int_eq(dlock_lock(d, "a", 0, &f1, &holds), 0);
    ck_assert_uint_gt(f1, 0);
    ck_assert_uint_eq(holds, 1);
    ck_assert_int_eq(dlock_lock(d, "a", 0, &f2, &holds), 0);
    ck_assert_uint_eq(f2, f1);
    ck_assert_uint_eq(holds, 2);
    ck_assert_int_eq(dlock_unlock(d, "a", &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_unlock(d, "a", &left), 0);
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(dlock_unlock(d, "a", &left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_lock(d, "a", 0, &f2, NULL), 0);
    ck_assert_uint_gt(f2, f1);
    ck_assert_int_eq(dlock_ping(d), 0);
    dlock_close(d);
}
END_TEST

START_TEST(trylock_status_renew) {
    dlock_t *a = open_client(), *b = open_client();
    uint64_t fence;
    long long ttl = 0;
    ck_assert_int_eq(dlock_lock(a, "t", 0, &fence, NULL), 0);
    ck_assert_int_eq(dlock_trylock(b, "t", 0, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_gt(ttl, 0);
    long long t0 = h_now_ms();
    ck_assert_int_eq(dlock_trylock(b, "t", 200, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_ge(h_now_ms() - t0, 190);

    dlock_status_t st;
    ck_assert_int_eq(dlock_status(a, "t", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE);
    ck_assert_uint_eq(st.holds, 1);
    ck_assert_uint_eq(st.fence, fence);
    ck_assert_int_gt(st.ttl_ms, 0);
    ck_assert_int_eq(dlock_status(b, "t", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_TAKEN);
    ck_assert_int_eq(dlock_status(b, "free", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);

    /* A lock taken with a lease: RENEW sets it to the lease given (what
     * RENEW does to a watchdog lock is the daemon's tests' business). */
    ck_assert_int_eq(dlock_lock(a, "tl", 10000, NULL, NULL), 0);
    ck_assert_int_eq(dlock_renew(a, "tl", 5000, &ttl), 0);
    ck_assert_int_eq(ttl, 5000);
    ck_assert_int_eq(dlock_renew(b, "t", 0, &ttl), DLOCK_ENOTHELD);

    int removed = -1;
    ck_assert_int_eq(dlock_force_unlock(b, "t", &removed), 0);
    ck_assert_int_eq(removed, 1);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

typedef struct seen_s {
    int count;
    char name[64];
    char reason[32];
} seen_t;

static void on_lost(dlock_t *d, const char *name, const char *reason, void *data) {
    seen_t *s = data;
    (void)d;
    s->count++;
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

START_TEST(lost_event_through_poll) {
    dlock_t *d = open_client();
    seen_t seen = {0};
    dlock_set_lost_cb(d, on_lost, &seen);
    ck_assert_int_eq(dlock_lock(d, "lease", 200, NULL, NULL), 0);
    /* The descriptor becomes readable when the event arrives. */
    struct pollfd pfd = {.fd = dlock_fd(d), .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, H_WAIT_MS), 1);
    ck_assert_int_eq(dlock_poll(d, 0), 1);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_str_eq(seen.name, "lease");
    ck_assert_str_eq(seen.reason, "expired");
    ck_assert_int_eq(dlock_poll(d, 0), 0);
    ck_assert_int_eq(dlock_unlock(d, "lease", NULL), DLOCK_ENOTHELD);
    dlock_close(d);
}
END_TEST

START_TEST(event_met_while_waiting_for_reply) {
    dlock_t *d = open_client();
    seen_t seen = {0};
    dlock_set_lost_cb(d, on_lost, &seen);
    ck_assert_int_eq(dlock_lock(d, "short", 150, NULL, NULL), 0);
    /* A blocking request that outlasts the lease meets the event first. */
    dlock_t *other = open_client();
    ck_assert_int_eq(dlock_lock(other, "long", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_trylock(d, "long", 600, 0, NULL, NULL, NULL), DLOCK_ETIMEOUT);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_str_eq(seen.name, "short");
    dlock_close(other);
    dlock_close(d);
}
END_TEST

/* A fake dlockd for one connection: answers its first request line with
 * reply, all of it in one write, then waits until the client closes. */
typedef struct fake_s {
    int lfd;
    const char *reply;
} fake_t;

static void *fake_serve(void *arg) {
    fake_t *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[512];
    size_t got = 0;
    while (got < sizeof(buf) && memchr(buf, '\n', got) == NULL) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    ssize_t n = write(fd, f->reply, strlen(f->reply));
    (void)n;
    while (read(fd, buf, sizeof(buf)) > 0) continue;
    close(fd);
    return NULL;
}

/* An event read together with a call's reply reaches the lost callback
 * before the call returns: it is read already, so poll(dlock_fd()) would
 * never see it. A 1 ms lease (issue 42) has dlockd send "!LOST x expired"
 * right behind the grant. */
START_TEST(event_read_with_the_reply) {
    char path[512];
    snprintf(path, sizeof(path), "%s/fake.sock", h_dir());
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(lfd, 1), 0);
    fake_t f = {lfd, "OK 7 1\n!LOST x expired\n"};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fake_serve, &f), 0);
    int err = 0;
    dlock_t *d = dlock_connect(path, &err);
    ck_assert_msg(d != NULL, "connect: %s", dlock_strerror(err));
    seen_t seen = {0};
    dlock_set_lost_cb(d, on_lost, &seen);
    uint64_t fence = 0;
    ck_assert_int_eq(dlock_lock(d, "x", 1, &fence, NULL), 0);
    ck_assert_uint_eq(fence, 7);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_str_eq(seen.name, "x");
    ck_assert_str_eq(seen.reason, "expired");
    dlock_close(d);
    pthread_join(t, NULL);
    close(lfd);
}
END_TEST

START_TEST(errors_and_names) {
    dlock_t *d = open_client();
    ck_assert_int_eq(dlock_lock(d, "", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_lock(d, "has space", 0, NULL, NULL), DLOCK_ENAME);
    char big[300];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(dlock_lock(d, big, 0, NULL, NULL), DLOCK_ENAME);
    char reply[128];
    ck_assert_int_eq(dlock_request(d, "BOGUS", reply, sizeof(reply)), DLOCK_EUNKNOWN);
    ck_assert_msg(strncmp(reply, "ERR UNKNOWN", 11) == 0, "%s", reply);
    ck_assert_str_eq(dlock_err_name(DLOCK_ENOTHELD), "NOTHELD");
    ck_assert_str_eq(dlock_strerror(DLOCK_ETIMEOUT), "lock not acquired within the wait");
    ck_assert_str_eq(dlock_strerror(0), "success");
    ck_assert_str_eq(dlock_strerror(12345), "unknown error");
    char info[1024];
    ck_assert_int_eq(dlock_info(d, info, sizeof(info)), 0);
    ck_assert_msg(strncmp(info, "version=", 8) == 0, "%s", info);
    dlock_close(d);

    int err = 0;
    ck_assert_ptr_null(dlock_connect("/nonexistent/dlockd.sock", &err));
    ck_assert_int_eq(err, DLOCK_ECONNECT);
}
END_TEST

/* dlock_strerror(DLOCK_ENAME) after a call refused a name shows the name,
 * quoted and escaped, as every client's error does (issue 42); a long one
 * cut after 40 bytes. */
START_TEST(bad_name_error_shows_it) {
    dlock_t *d = open_client();
    ck_assert_int_eq(dlock_lock(d, "has space", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_str_eq(dlock_strerror(DLOCK_ENAME),
                     "bad lock name \"has space\": only printable ASCII without spaces is allowed");
    ck_assert_int_eq(dlock_status(d, "", NULL), DLOCK_ENAME);
    ck_assert_str_eq(dlock_strerror(DLOCK_ENAME), "bad lock name \"\": must be 1 to 255 bytes");
    ck_assert_int_eq(dlock_trylock(d, "ctl\001\"q\\\n", 0, 0, NULL, NULL, NULL), DLOCK_ENAME);
    ck_assert_str_eq(dlock_strerror(DLOCK_ENAME), "bad lock name \"ctl\\x01\\\"q\\\\\\x0a\": "
                                                  "only printable ASCII without spaces is allowed");
    char big[257];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    const char *names[] = {"ok", big};
    ck_assert_int_eq(dlock_mlock(d, 2, names, 0, NULL), DLOCK_ENAME);
    ck_assert_str_eq(dlock_strerror(DLOCK_ENAME), "bad lock name "
                     "\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"... (256 bytes): "
                     "must be 1 to 255 bytes");
    ck_assert_int_eq(dlock_ping(d), 0); /* refused by the client: nothing was sent */
    dlock_close(d);
}
END_TEST

/* dlock_strerror(DLOCK_ECONNECT) after a failed dlock_connect names the
 * socket it tried (given, or from $DLOCK_SOCKET) and why, with a hint. */
START_TEST(connect_error_names_socket) {
    int err = 0;
    errno = 0;
    ck_assert_ptr_null(dlock_connect("/nonexistent/dlockd.sock", &err));
    ck_assert_int_eq(err, DLOCK_ECONNECT);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_str_eq(dlock_strerror(err), "cannot connect to dlockd at /nonexistent/dlockd.sock: "
                                          "No such file or directory (is dlockd running?)");
    setenv("DLOCK_SOCKET", "/nonexistent/env.sock", 1);
    ck_assert_ptr_null(dlock_connect(NULL, &err));
    ck_assert_str_eq(dlock_strerror(err), "cannot connect to dlockd at /nonexistent/env.sock: "
                                          "No such file or directory (is dlockd running?)");
    /* After a success the plain text is back. */
    setenv("DLOCK_SOCKET", h_dlockd_sock(daemon_idx), 1);
    dlock_t *d = open_client();
    ck_assert_str_eq(dlock_strerror(DLOCK_ECONNECT), "cannot connect to dlockd");
    dlock_close(d);
}
END_TEST

/* Permission denied comes with what to do about it. As root, a child that
 * became nobody connects to a dlockd whose socket is 0600 (root's); anyone
 * else connects to a path in a directory it cannot search. */
START_TEST(connect_permission_denied_hints) {
    char sock[600], want[900], got[900] = "";
    int as_nobody = geteuid() == 0;
    if (as_nobody) {
        int d = h_dlockd_start("[server]\nsocket_mode = 0600\n");
        snprintf(sock, sizeof(sock), "%s", h_dlockd_sock(d));
    } else {
        snprintf(sock, sizeof(sock), "%s/closed", h_dir());
        ck_assert_int_eq(mkdir(sock, 0), 0);
        snprintf(sock, sizeof(sock), "%s/closed/d.sock", h_dir());
    }
    snprintf(want, sizeof(want),
             "cannot connect to dlockd at %s: Permission denied "
             "(add yourself to the dlockd group, or check socket_mode)", sock);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char dir[600];
        snprintf(dir, sizeof(dir), "%s", h_dir());
        if (as_nobody && (chmod(h_dir(), 0711) != 0 || chmod(dirname(dir), 0711) != 0 ||
                          setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(1);
        int err = 0;
        dlock_t *d = dlock_connect(sock, &err);
        const char *msg = d == NULL ? dlock_strerror(err) : "connected";
        if (write(p[1], msg, strlen(msg)) < 0) _exit(1);
        _exit(0);
    }
    close(p[1]);
    ssize_t n = read(p[0], got, sizeof(got) - 1);
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    got[n > 0 ? n : 0] = '\0';
    ck_assert_str_eq(got, want);
}
END_TEST

START_TEST(close_releases_and_daemon_loss_is_seen) {
    dlock_t *a = open_client(), *b = open_client();
    ck_assert_int_eq(dlock_lock(a, "c", 0, NULL, NULL), 0);
    dlock_close(a);
    ck_assert_int_eq(dlock_trylock(b, "c", 5000, 0, NULL, NULL, NULL), 0);
    h_dlockd_stop(daemon_idx, SIGKILL);
    ck_assert_int_eq(dlock_poll(b, H_WAIT_MS), DLOCK_ECLOSED);
    ck_assert_int_eq(dlock_ping(b), DLOCK_ECLOSED);
    dlock_close(b);
}
END_TEST

/* Read/write locks: readers share, a writer excludes, each kind has its
 * own unlock, and the other kind's requests are DLOCK_EKIND. */
START_TEST(read_write_locks) {
    dlock_t *a = open_client(), *b = open_client(), *c = open_client();
    uint64_t fa = 1, fb = 1, fc = 0;
    uint32_t holds = 0, left = 9;
    long long ttl = 0;
    dlock_status_t st;

    ck_assert_int_eq(dlock_rlock(a, "rw", 0, &fa, &holds), 0);
    ck_assert_uint_eq(holds, 1);
    ck_assert_int_eq(dlock_tryrlock(b, "rw", 0, 0, &fb, &holds, NULL), 0);
    ck_assert_uint_eq(holds, 1);
    ck_assert_uint_eq(fb, fa); /* a read grant does not raise the fence */
    ck_assert_int_eq(dlock_rlock(a, "rw", 0, NULL, &holds), 0);
    ck_assert_uint_eq(holds, 2);
    ck_assert_int_eq(dlock_status(a, "rw", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_READ);
    ck_assert_uint_eq(st.holds, 2);
    ck_assert_int_gt(st.ttl_ms, 0);
    ck_assert_int_eq(dlock_status(c, "rw", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_READ);
    ck_assert_uint_eq(st.holds, 0);
    char reply[128];
    ck_assert_int_eq(dlock_request(c, "STATUS rw", reply, sizeof(reply)), 0);
    ck_assert_msg(strncmp(reply, "OK READ 2 0 ", 12) == 0, "%s", reply);

    /* Readers keep a writer out, and the other kind's requests are refused. */
    ck_assert_int_eq(dlock_trywlock(c, "rw", 0, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_gt(ttl, 0);
    ck_assert_int_eq(dlock_wlock(a, "rw", 0, NULL, NULL), DLOCK_EKIND); /* an upgrade */
    ck_assert_int_eq(dlock_unlock(a, "rw", NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_lock(c, "rw", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trylock(c, "rw", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_wunlock(a, "rw", NULL), DLOCK_ENOTHELD);

    ck_assert_int_eq(dlock_runlock(a, "rw", &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_runlock(a, "rw", &left), 0);
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(dlock_runlock(a, "rw", &left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_runlock(b, "rw", &left), 0);
    ck_assert_uint_eq(left, 0);

    /* A writer: alone, reentrant, and its fence rises. */
    ck_assert_int_eq(dlock_trywlock(c, "rw", 5000, 0, &fc, &holds, NULL), 0);
    ck_assert_uint_eq(holds, 1);
    ck_assert_uint_gt(fc, fa);
    ck_assert_int_eq(dlock_wlock(c, "rw", 0, &fb, &holds), 0);
    ck_assert_uint_eq(fb, fc);
    ck_assert_uint_eq(holds, 2);
    ck_assert_int_eq(dlock_status(c, "rw", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_WRITE);
    ck_assert_uint_eq(st.holds, 2);
    ck_assert_int_eq(dlock_status(a, "rw", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_WRITE);
    ck_assert_uint_eq(st.holds, 0);
    long long t0 = h_now_ms();
    ck_assert_int_eq(dlock_tryrlock(a, "rw", 100, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_ge(h_now_ms() - t0, 90);
    ck_assert_int_eq(dlock_trywlock(b, "rw", 0, 0, NULL, NULL, NULL), DLOCK_ETIMEOUT);

    /* A downgrade: the writer takes a read hold, then lets go of writing. */
    ck_assert_int_eq(dlock_rlock(c, "rw", 0, NULL, &holds), 0);
    ck_assert_int_eq(dlock_wunlock(c, "rw", &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_wunlock(c, "rw", &left), 0);
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(dlock_status(c, "rw", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_READ);
    ck_assert_uint_eq(st.holds, 1);
    ck_assert_int_eq(dlock_tryrlock(a, "rw", 0, 0, NULL, NULL, NULL), 0);

    /* A plain lock refuses read/write requests. */
    ck_assert_int_eq(dlock_lock(a, "p", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_rlock(b, "p", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trywlock(b, "p", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_runlock(a, "p", NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_request(b, "RLOCK p", reply, sizeof(reply)), DLOCK_EKIND);
    ck_assert_msg(strncmp(reply, "ERR KIND ", 9) == 0, "%s", reply);
    ck_assert_int_eq(dlock_unlock(a, "p", &left), 0);

    /* Closing releases read holds too. */
    dlock_close(a);
    dlock_close(c);
    ck_assert_int_eq(dlock_trywlock(b, "rw", 5000, 0, NULL, NULL, NULL), 0);
    dlock_close(b);
}
END_TEST

START_TEST(read_write_errors) {
    dlock_t *d = open_client();
    ck_assert_int_eq(dlock_rlock(d, "", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_wlock(d, "has space", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_tryrlock(d, "", 0, 0, NULL, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_trywlock(d, "", 0, 0, NULL, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_runlock(d, "", NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_wunlock(d, "", NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_ping(d), 0);
    ck_assert_str_eq(dlock_err_name(DLOCK_EKIND), "KIND");
    ck_assert_str_eq(dlock_strerror(DLOCK_EKIND), "not allowed for this kind of lock");
    /* Codes keep their values (libdlock.so.0): new ones come last. */
    ck_assert_int_eq(DLOCK_ECONNECT, -999);
    ck_assert_int_eq(DLOCK_ELOST, -985);
    ck_assert_int_eq(DLOCK_EKIND, -984);
    dlock_close(d);
}
END_TEST

/* A semaphore's STATUS through dlock_status: DLOCK_SEM with its numbers. */
static void assert_sem(dlock_t *d, const char *name, uint32_t available, uint32_t mine) {
    dlock_status_t st;
    ck_assert_int_eq(dlock_status(d, name, &st), 0);
    ck_assert_int_eq(st.state, DLOCK_SEM);
    ck_assert_uint_eq(st.sem.available, available);
    ck_assert_uint_eq(st.sem.mine, mine);
    ck_assert_uint_eq(st.holds, mine);
    ck_assert_int_eq(st.ttl_ms, -1);
}

/* Waits (H_WAIT_MS at most) until dlockd counts at least n waiting
 * requests. */
static void await_waiters(long long n) {
    h_conn_t *c = h_connect_index(daemon_idx);
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(c, "waiters") < n) {
        ck_assert_msg(h_now_ms() < end, "never %lld waiters", n);
        usleep(1000);
    }
    h_close(c);
}

/* A child process that takes permits of name over a connection of its own
 * (dlock_acquire when wait_ms < 0, else dlock_tryacquire) and exits 0 if
 * that answered held_want permits, 1 if it answered otherwise. */
static pid_t spawn_acquire(const char *name, uint32_t permits, long long wait_ms,
                           uint32_t held_want) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int err = 0;
        uint32_t held = 0;
        dlock_t *d = dlock_connect(NULL, &err);
        if (d == NULL) _exit(2);
        int r = wait_ms < 0 ? dlock_acquire(d, name, permits, 0, &held)
                            : dlock_tryacquire(d, name, permits, (uint32_t)wait_ms, 0, &held);
        _exit(r == 0 && held == held_want ? 0 : 1);
    }
    return pid;
}

/* Its exit code, within H_WAIT_MS. */
static int reap_child(pid_t pid) {
    long long end = h_now_ms() + H_WAIT_MS;
    int status;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (h_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            ck_abort_msg("the child did not finish in time");
        }
        usleep(1000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Semaphores: permits set once, acquired up to the size by one holder
 * (which may take more), another connection's try timing out until they
 * are released, RELEASE of more than held refused without releasing
 * anything, and STATUS's numbers on the way. */
START_TEST(semaphore_permits) {
    dlock_t *a = open_client(), *b = open_client();
    int set = -1;
    uint32_t held = 0, left = 9;
    char reply[128];

    ck_assert_int_eq(dlock_seminit(a, "s", 3, &set), 0);
    ck_assert_int_eq(set, 1);
    ck_assert_int_eq(dlock_seminit(b, "s", 5, &set), 0);
    ck_assert_int_eq(set, 0);
    ck_assert_int_eq(dlock_seminit(a, "s", 3, &set), 0);
    ck_assert_int_eq(set, 0);
    assert_sem(b, "s", 3, 0); /* the later SEMINITs changed nothing */

    ck_assert_int_eq(dlock_acquire(a, "s", 2, 0, &held), 0);
    ck_assert_uint_eq(held, 2);
    assert_sem(a, "s", 1, 2);
    assert_sem(b, "s", 1, 0);
    ck_assert_int_eq(dlock_request(a, "STATUS s", reply, sizeof(reply)), 0);
    ck_assert_str_eq(reply, "OK SEM 1 2");

    /* Two are not free for b: at once, nor after a wait. */
    ck_assert_int_eq(dlock_tryacquire(b, "s", 2, 0, 0, &held), DLOCK_ETIMEOUT);
    long long t0 = h_now_ms();
    ck_assert_int_eq(dlock_tryacquire(b, "s", 2, 200, 0, &held), DLOCK_ETIMEOUT);
    ck_assert_int_ge(h_now_ms() - t0, 190);

    /* A holder takes more: the last one. */
    ck_assert_int_eq(dlock_tryacquire(a, "s", 1, 0, 0, &held), 0);
    ck_assert_uint_eq(held, 3);
    assert_sem(a, "s", 0, 3);
    ck_assert_int_eq(dlock_tryacquire(b, "s", 1, 0, 0, NULL), DLOCK_ETIMEOUT);

    /* More than held: NOTHELD, and nothing is released. */
    ck_assert_int_eq(dlock_release(a, "s", 4, &left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_release(b, "s", 1, &left), DLOCK_ENOTHELD);
    assert_sem(a, "s", 0, 3);

    /* After a RELEASE b gets its two. */
    ck_assert_int_eq(dlock_release(a, "s", 2, &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_tryacquire(b, "s", 2, H_WAIT_MS, 0, &held), 0);
    ck_assert_uint_eq(held, 2);
    assert_sem(b, "s", 0, 2);
    ck_assert_int_eq(dlock_release(a, "s", 1, &left), 0);
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(dlock_release(a, "s", 1, &left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_release(b, "s", 1, &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_release(b, "s", 1, &left), 0);
    ck_assert_uint_eq(left, 0);
    /* All three are free again. */
    ck_assert_int_eq(dlock_tryacquire(a, "s", 3, H_WAIT_MS, 0, &held), 0);
    ck_assert_uint_eq(held, 3);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

/* A waiting TRYACQUIRE is granted by a RELEASE, a waiting ACQUIRE by a
 * SEMINIT (until then a semaphore whose permits were never set has none). */
START_TEST(semaphore_waiters_are_woken) {
    dlock_t *a = open_client();
    uint32_t held = 0, left = 9;
    int set = -1;

    ck_assert_int_eq(dlock_seminit(a, "w", 2, &set), 0);
    ck_assert_int_eq(dlock_acquire(a, "w", 2, 0, &held), 0);
    pid_t waiter = spawn_acquire("w", 1, H_WAIT_MS, 1);
    await_waiters(1);
    ck_assert_int_eq(dlock_release(a, "w", 1, &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(reap_child(waiter), 0);

    ck_assert_int_eq(dlock_tryacquire(a, "unset", 1, 0, 0, &held), DLOCK_ETIMEOUT);
    ck_assert_int_eq(dlock_tryacquire(a, "unset", 1, 100, 0, &held), DLOCK_ETIMEOUT);
    waiter = spawn_acquire("unset", 2, -1, 2);
    await_waiters(1);
    ck_assert_int_eq(dlock_seminit(a, "unset", 2, &set), 0);
    ck_assert_int_eq(set, 1);
    ck_assert_int_eq(reap_child(waiter), 0);
    /* The waiter's connection closed: its two are back. */
    ck_assert_int_eq(dlock_tryacquire(a, "unset", 2, H_WAIT_MS, 0, &held), 0);
    ck_assert_uint_eq(held, 2);
    dlock_close(a);
}
END_TEST

/* Closing a connection gives its permits back; permits with a lease are
 * renewed with dlock_renew and lost (!LOST) when the lease runs out. */
START_TEST(semaphore_close_and_lease) {
    dlock_t *a = open_client(), *b = open_client();
    uint32_t held = 0, left = 9;
    long long ttl = 0;

    ck_assert_int_eq(dlock_seminit(a, "c", 2, NULL), 0);
    ck_assert_int_eq(dlock_acquire(a, "c", 1, 0, &held), 0);
    ck_assert_int_eq(dlock_acquire(a, "c", 1, 0, &held), 0);
    ck_assert_uint_eq(held, 2);
    ck_assert_int_eq(dlock_tryacquire(b, "c", 1, 0, 0, &held), DLOCK_ETIMEOUT);
    dlock_close(a);
    ck_assert_int_eq(dlock_tryacquire(b, "c", 2, H_WAIT_MS, 0, &held), 0);
    ck_assert_uint_eq(held, 2);

    ck_assert_int_eq(dlock_seminit(b, "cl", 1, NULL), 0);
    ck_assert_int_eq(dlock_acquire(b, "cl", 1, 10000, &held), 0);
    ck_assert_int_eq(dlock_renew(b, "cl", 5000, &ttl), 0);
    ck_assert_int_eq(ttl, 5000);

    seen_t seen = {0};
    dlock_set_lost_cb(b, on_lost, &seen);
    ck_assert_int_eq(dlock_seminit(b, "ce", 1, NULL), 0);
    ck_assert_int_eq(dlock_acquire(b, "ce", 1, 200, &held), 0);
    struct pollfd pfd = {.fd = dlock_fd(b), .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, H_WAIT_MS), 1);
    ck_assert_int_eq(dlock_poll(b, 0), 1);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_str_eq(seen.name, "ce");
    ck_assert_str_eq(seen.reason, "expired");
    ck_assert_int_eq(dlock_release(b, "ce", 1, &left), DLOCK_ENOTHELD);
    dlock_t *c = open_client();
    ck_assert_int_eq(dlock_tryacquire(c, "ce", 1, H_WAIT_MS, 0, &held), 0);
    dlock_close(b);
    dlock_close(c);
}
END_TEST

/* A semaphore's name refuses the lock calls, a lock's name the semaphore
 * calls: DLOCK_EKIND, and nothing changes. */
START_TEST(semaphore_kind_errors) {
    dlock_t *a = open_client(), *b = open_client();
    uint32_t held = 0;
    char reply[128];

    ck_assert_int_eq(dlock_seminit(a, "sk", 2, NULL), 0);
    /* Set, and nobody holds a permit: already a semaphore. */
    ck_assert_int_eq(dlock_lock(b, "sk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_acquire(a, "sk", 1, 0, &held), 0);
    ck_assert_int_eq(dlock_lock(b, "sk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trylock(b, "sk", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_rlock(b, "sk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trywlock(b, "sk", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_unlock(a, "sk", NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_request(b, "LOCK sk", reply, sizeof(reply)), DLOCK_EKIND);
    ck_assert_msg(strncmp(reply, "ERR KIND ", 9) == 0, "%s", reply);
    ck_assert_int_eq(dlock_request(b, "WHO sk", reply, sizeof(reply)), DLOCK_EKIND);
    ck_assert_msg(strncmp(reply, "ERR KIND ", 9) == 0, "%s", reply);
    assert_sem(a, "sk", 1, 1);

    ck_assert_int_eq(dlock_lock(a, "pl", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_seminit(b, "pl", 2, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_acquire(b, "pl", 1, 0, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_tryacquire(b, "pl", 1, 0, 0, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_release(a, "pl", 1, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_rlock(a, "rl", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_seminit(b, "rl", 2, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_acquire(b, "rl", 1, 0, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_release(a, "rl", 1, NULL), DLOCK_EKIND);
    dlock_status_t st;
    ck_assert_int_eq(dlock_status(a, "pl", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE);
    ck_assert_int_eq(dlock_status(a, "rl", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_READ);
    ck_assert_uint_eq(st.holds, 1);
    ck_assert_int_eq(dlock_ping(a), 0);
    ck_assert_int_eq(dlock_ping(b), 0);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

/* FORCEUNLOCK of a semaphore gives back every permit, whoever holds it,
 * and each holder hears !LOST <name> forced. */
START_TEST(semaphore_force_unlock) {
    dlock_t *a = open_client(), *b = open_client(), *c = open_client();
    seen_t sa = {0}, sb = {0};
    uint32_t held = 0;
    int removed = -1;

    dlock_set_lost_cb(a, on_lost, &sa);
    dlock_set_lost_cb(b, on_lost, &sb);
    ck_assert_int_eq(dlock_seminit(c, "f", 3, NULL), 0);
    ck_assert_int_eq(dlock_acquire(a, "f", 2, 0, &held), 0);
    ck_assert_int_eq(dlock_acquire(b, "f", 1, 0, &held), 0);
    ck_assert_int_eq(dlock_force_unlock(c, "f", &removed), 0);
    ck_assert_int_eq(removed, 1);
    ck_assert_int_eq(dlock_poll(a, H_WAIT_MS), 1);
    ck_assert_int_eq(dlock_poll(b, H_WAIT_MS), 1);
    ck_assert_str_eq(sa.name, "f");
    ck_assert_str_eq(sa.reason, "forced");
    ck_assert_str_eq(sb.name, "f");
    ck_assert_str_eq(sb.reason, "forced");
    ck_assert_int_eq(dlock_force_unlock(c, "f", &removed), 0);
    ck_assert_int_eq(removed, 0);
    ck_assert_int_eq(dlock_tryacquire(c, "f", 3, H_WAIT_MS, 0, &held), 0);
    ck_assert_uint_eq(held, 3);
    dlock_close(a);
    dlock_close(b);
    dlock_close(c);
}
END_TEST

START_TEST(semaphore_errors) {
    dlock_t *d = open_client();
    ck_assert_int_eq(dlock_seminit(d, "", 1, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_acquire(d, "has space", 1, 0, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_tryacquire(d, "", 1, 0, 0, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_release(d, "", 1, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_seminit(d, "e", 2147483648u, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_acquire(d, "e", 0, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_acquire(d, "e", DLOCK_PERMITS_MAX + 1, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_tryacquire(d, "e", 0, 0, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_release(d, "e", 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_ping(d), 0);
    /* The largest size and request are fine. */
    int set = -1;
    uint32_t held = 0;
    ck_assert_int_eq(dlock_seminit(d, "e", 2147483647u, &set), 0);
    ck_assert_int_eq(set, 1);
    ck_assert_int_eq(dlock_tryacquire(d, "e", DLOCK_PERMITS_MAX, 0, 0, &held), 0);
    ck_assert_uint_eq(held, DLOCK_PERMITS_MAX);
    dlock_close(d);
}
END_TEST

/* Waits (H_WAIT_MS at most) until dlockd counts at most n waiting
 * requests. */
static void await_waiters_at_most(long long n) {
    h_conn_t *c = h_connect_index(daemon_idx);
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(c, "waiters") > n) {
        ck_assert_msg(h_now_ms() < end, "still more than %lld waiters", n);
        usleep(1000);
    }
    h_close(c);
}

/* What a fair lock's waiter reports through its pipe: who it is, and the
 * fence it was granted. */
typedef struct fair_grant_s {
    int id;
    uint64_t fence;
} fair_grant_t;

/* A child process that waits for the fair lock name over a connection of
 * its own (dlock_fairlock), writes its id and fence to fd while it holds
 * the lock, unlocks and exits 0 (1 if a call failed). So the order of the
 * reports on fd is the order of the grants. */
static pid_t spawn_fairlock(const char *name, int id, int fd) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int err = 0;
        fair_grant_t g = {id, 0};
        dlock_t *d = dlock_connect(NULL, &err);
        if (d == NULL) _exit(2);
        if (dlock_fairlock(d, name, 0, &g.fence, NULL) != 0) _exit(1);
        if (write(fd, &g, sizeof(g)) != (ssize_t)sizeof(g)) _exit(1);
        _exit(dlock_unlock(d, name, NULL) == 0 ? 0 : 1);
    }
    return pid;
}

/* The next grant a waiter reported on fd, within H_WAIT_MS. */
static fair_grant_t next_grant(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    fair_grant_t g = {0, 0};
    ck_assert_msg(poll(&pfd, 1, H_WAIT_MS) == 1, "no grant within %d ms", H_WAIT_MS);
    ck_assert_int_eq(read(fd, &g, sizeof(g)), (ssize_t)sizeof(g));
    return g;
}

/* 1 if a grant was reported on fd and not read yet. */
static int grant_pending(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1;
}

/* Fair locks are granted, reentered, renewed and released by dlock_unlock
 * as plain locks are: one fence per grant, a larger one for the next;
 * dlock_status shows them as plain locks; a lease that runs out is lost. */
START_TEST(fair_lock_reenter_unlock) {
    dlock_t *a = open_client(), *b = open_client();
    uint64_t f1 = 0, f2 = 0;
    uint32_t holds = 0, left = 9;
    long long ttl = 0;
    dlock_status_t st;

    ck_assert_int_eq(dlock_fairlock(a, "fl", 0, &f1, &holds), 0);
    ck_assert_uint_gt(f1, 0);
    ck_assert_uint_eq(holds, 1);
    ck_assert_int_eq(dlock_fairlock(a, "fl", 0, &f2, &holds), 0);
    ck_assert_uint_eq(f2, f1);
    ck_assert_uint_eq(holds, 2);
    /* The holder's one try (no wait) gets it again too. */
    ck_assert_int_eq(dlock_tryfairlock(a, "fl", 0, 0, &f2, &holds, NULL), 0);
    ck_assert_uint_eq(f2, f1);
    ck_assert_uint_eq(holds, 3);
    ck_assert_int_eq(dlock_status(a, "fl", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE);
    ck_assert_uint_eq(st.holds, 3);
    ck_assert_uint_eq(st.fence, f1);
    ck_assert_int_gt(st.ttl_ms, 0);
    ck_assert_int_eq(dlock_status(b, "fl", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_TAKEN);
    ck_assert_int_eq(dlock_renew(a, "fl", 0, &ttl), 0);
    ck_assert_int_gt(ttl, 0);
    ck_assert_int_eq(dlock_renew(b, "fl", 0, &ttl), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_unlock(b, "fl", &left), DLOCK_ENOTHELD);

    ck_assert_int_eq(dlock_unlock(a, "fl", &left), 0);
    ck_assert_uint_eq(left, 2);
    ck_assert_int_eq(dlock_unlock(a, "fl", &left), 0);
    ck_assert_uint_eq(left, 1);
    ck_assert_int_eq(dlock_unlock(a, "fl", &left), 0);
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(dlock_unlock(a, "fl", &left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_status(b, "fl", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);
    /* The next grant, to another connection, gets a larger fence. */
    ck_assert_int_eq(dlock_tryfairlock(b, "fl", H_WAIT_MS, 0, &f2, &holds, NULL), 0);
    ck_assert_uint_gt(f2, f1);
    ck_assert_uint_eq(holds, 1);

    /* With a lease: renewed to the lease asked for, and lost when it runs
     * out. */
    ck_assert_int_eq(dlock_fairlock(a, "fll", 10000, NULL, NULL), 0);
    ck_assert_int_eq(dlock_renew(a, "fll", 5000, &ttl), 0);
    ck_assert_int_eq(ttl, 5000);
    seen_t seen = {0};
    dlock_set_lost_cb(a, on_lost, &seen);
    ck_assert_int_eq(dlock_tryfairlock(a, "fle", 0, 200, NULL, NULL, NULL), 0);
    struct pollfd pfd = {.fd = dlock_fd(a), .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, H_WAIT_MS), 1);
    ck_assert_int_eq(dlock_poll(a, 0), 1);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_str_eq(seen.name, "fle");
    ck_assert_str_eq(seen.reason, "expired");
    ck_assert_int_eq(dlock_unlock(a, "fle", NULL), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_tryfairlock(b, "fle", H_WAIT_MS, 0, NULL, NULL, NULL), 0);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

/* Another connection's TRYFAIRLOCK times out while the lock is held, at
 * once or after its wait, and leaves no place behind: once the holder lets
 * go, a third connection's one try (which fails while anyone queues) gets
 * the lock. */
START_TEST(fair_trylock_times_out_and_leaves) {
    dlock_t *a = open_client(), *b = open_client(), *c = open_client();
    uint64_t fence = 0;
    long long ttl = 0;

    ck_assert_int_eq(dlock_fairlock(a, "ft", 0, &fence, NULL), 0);
    ck_assert_int_eq(dlock_tryfairlock(b, "ft", 0, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_gt(ttl, 0);
    long long t0 = h_now_ms();
    ck_assert_int_eq(dlock_tryfairlock(b, "ft", 200, 0, NULL, NULL, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_ge(h_now_ms() - t0, 190);
    ck_assert_int_gt(ttl, 0);
    await_waiters_at_most(0);
    ck_assert_int_eq(dlock_unlock(a, "ft", NULL), 0);
    uint64_t next = 0;
    ck_assert_int_eq(dlock_tryfairlock(c, "ft", 0, 0, &next, NULL, NULL), 0);
    ck_assert_uint_gt(next, fence);
    /* And b, whose place went with its wait, is just another try now. */
    ck_assert_int_eq(dlock_tryfairlock(b, "ft", 0, 0, NULL, NULL, NULL), DLOCK_ETIMEOUT);
    ck_assert_int_eq(dlock_unlock(c, "ft", NULL), 0);
    ck_assert_int_eq(dlock_tryfairlock(b, "ft", 0, 0, NULL, NULL, NULL), 0);
    dlock_close(a);
    dlock_close(b);
    dlock_close(c);
}
END_TEST

/* Three waiters, each queued (INFO's waiters) before the next one comes,
 * are granted in that order, each only after the one before it let go,
 * with rising fences. */
START_TEST(fair_waiters_in_order) {
    dlock_t *a = open_client();
    uint64_t fence = 0;
    int fds[2];
    pid_t w[3];

    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(dlock_fairlock(a, "fifo", 0, &fence, NULL), 0);
    for (int i = 0; i < 3; i++) {
        w[i] = spawn_fairlock("fifo", i + 1, fds[1]);
        await_waiters(i + 1);
    }
    ck_assert_int_eq(grant_pending(fds[0]), 0);
    ck_assert_int_eq(dlock_unlock(a, "fifo", NULL), 0);
    for (int i = 0; i < 3; i++) {
        fair_grant_t g = next_grant(fds[0]);
        ck_assert_int_eq(g.id, i + 1);
        ck_assert_uint_gt(g.fence, fence);
        fence = g.fence;
    }
    for (int i = 0; i < 3; i++) ck_assert_int_eq(reap_child(w[i]), 0);
    close(fds[0]);
    close(fds[1]);
    dlock_close(a);
}
END_TEST

/* A waiter whose connection closes (its process killed) leaves the queue
 * at once: the next waiter gets the lock as soon as the holder lets go, not
 * after the dead one's place ends (lease_ms, 30 s, past H_WAIT_MS). */
START_TEST(fair_closed_waiter_lets_next_go) {
    dlock_t *a = open_client();
    int fds[2];
    pid_t w[3];

    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(dlock_fairlock(a, "fc", 0, NULL, NULL), 0);
    for (int i = 0; i < 3; i++) {
        w[i] = spawn_fairlock("fc", i + 1, fds[1]);
        await_waiters(i + 1);
    }
    /* The head goes, then the holder lets go: the second is next. */
    kill(w[0], SIGKILL);
    ck_assert_int_eq(reap_child(w[0]), 128 + SIGKILL);
    await_waiters_at_most(2);
    ck_assert_int_eq(dlock_unlock(a, "fc", NULL), 0);
    ck_assert_int_eq(next_grant(fds[0]).id, 2);
    ck_assert_int_eq(next_grant(fds[0]).id, 3);
    ck_assert_int_eq(reap_child(w[1]), 0);
    ck_assert_int_eq(reap_child(w[2]), 0);

    /* A waiter in the middle goes: the one behind it follows the head. */
    ck_assert_int_eq(dlock_fairlock(a, "fc", 0, NULL, NULL), 0);
    for (int i = 0; i < 3; i++) {
        w[i] = spawn_fairlock("fc", i + 4, fds[1]);
        await_waiters(i + 1);
    }
    kill(w[1], SIGKILL);
    ck_assert_int_eq(reap_child(w[1]), 128 + SIGKILL);
    await_waiters_at_most(2);
    ck_assert_int_eq(grant_pending(fds[0]), 0);
    ck_assert_int_eq(dlock_unlock(a, "fc", NULL), 0);
    ck_assert_int_eq(next_grant(fds[0]).id, 4);
    ck_assert_int_eq(next_grant(fds[0]).id, 6);
    ck_assert_int_eq(reap_child(w[0]), 0);
    ck_assert_int_eq(reap_child(w[2]), 0);
    /* Nobody queues any more: one try gets it. */
    ck_assert_int_eq(dlock_tryfairlock(a, "fc", 0, 0, NULL, NULL, NULL), 0);
    close(fds[0]);
    close(fds[1]);
    dlock_close(a);
}
END_TEST

/* On one dlockd a name is one kind: a fair lock's name refuses the other
 * lock calls, even from its holder, and a plain lock's name the fair ones
 * (DLOCK_EKIND, nothing changes); once free, a name may be taken as the
 * other kind. */
START_TEST(fair_kind_errors) {
    dlock_t *a = open_client(), *b = open_client();
    char reply[256];
    dlock_status_t st;

    ck_assert_int_eq(dlock_fairlock(a, "fk", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_lock(b, "fk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trylock(b, "fk", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_lock(a, "fk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_rlock(b, "fk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_trywlock(b, "fk", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_acquire(b, "fk", 1, 0, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_seminit(b, "fk", 1, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_request(b, "LOCK fk", reply, sizeof(reply)), DLOCK_EKIND);
    ck_assert_str_eq(reply, "ERR KIND fk is held as a fair lock (FAIRLOCK, UNLOCK)");

    ck_assert_int_eq(dlock_lock(a, "pk", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_fairlock(b, "pk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_tryfairlock(b, "pk", 0, 0, NULL, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_fairlock(a, "pk", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_request(b, "FAIRLOCK pk", reply, sizeof(reply)), DLOCK_EKIND);
    ck_assert_str_eq(reply, "ERR KIND pk is held as a plain lock (LOCK, UNLOCK)");
    ck_assert_int_eq(dlock_rlock(a, "rk", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_fairlock(b, "rk", 0, NULL, NULL), DLOCK_EKIND);

    /* Nothing changed. */
    ck_assert_int_eq(dlock_status(a, "fk", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE);
    ck_assert_uint_eq(st.holds, 1);
    ck_assert_int_eq(dlock_status(a, "pk", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE);
    ck_assert_uint_eq(st.holds, 1);
    ck_assert_int_eq(dlock_ping(b), 0);

    /* Free again, each name may be the other kind. */
    ck_assert_int_eq(dlock_unlock(a, "fk", NULL), 0);
    ck_assert_int_eq(dlock_unlock(a, "pk", NULL), 0);
    ck_assert_int_eq(dlock_trylock(b, "fk", H_WAIT_MS, 0, NULL, NULL, NULL), 0);
    ck_assert_int_eq(dlock_tryfairlock(b, "pk", H_WAIT_MS, 0, NULL, NULL, NULL), 0);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

START_TEST(fair_lock_errors) {
    dlock_t *d = open_client();
    ck_assert_int_eq(dlock_fairlock(d, "", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_fairlock(d, "has space", 0, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_tryfairlock(d, "", 0, 0, NULL, NULL, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_fairlock(d, "e", 2147483648u, NULL, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_tryfairlock(d, "e", 2147483648u, 0, NULL, NULL, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_ping(d), 0);
    dlock_close(d);
}
END_TEST

/* A call blocked on a dlock_t in a thread of its own, for dlock_cancel(). */
typedef struct blocked_s {
    dlock_t *d;
    const char *name;
    int sem; /* dlock_acquire() of 1 permit, else dlock_lock() */
    int latch; /* dlock_await() */
    size_t mn; /* dlock_mlock() of these names, when mn > 0 */
    const char *const *mnames;
    uint64_t fences[DLOCK_MNAMES_MAX];
    int result;
} blocked_t;

static void *blocked_call(void *arg) {
    blocked_t *b = arg;
    b->result = b->mn  ? dlock_mlock(b->d, b->mn, b->mnames, 0, b->fences)
              : b->sem ? dlock_acquire(b->d, b->name, 1, 0, NULL)
              : b->latch ? dlock_await(b->d, b->name)
                       : dlock_lock(b->d, b->name, 0, NULL, NULL);
    return NULL;
}

/* Starts b's call and returns once dlockd counts it waiting. */
static pthread_t start_blocked(blocked_t *b, h_conn_t *adm) {
    pthread_t t;
    long long before = h_info_value(adm, "waiters");
    ck_assert_int_eq(pthread_create(&t, NULL, blocked_call, b), 0);
    if (b->mn == 0) {
        h_await_waiters(adm, before + 1);
        return t;
    }
    /* An MLOCK may count once per name it waits for: at least one more. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(adm, "waiters") <= before) {
        ck_assert_msg(h_now_ms() < end, "the MLOCK never waited");
        usleep(1000);
    }
    return t;
}

START_TEST(cancel_withdraws_a_blocked_lock) {
    dlock_t *holder = open_client(), *d = open_client();
    h_conn_t *adm = h_connect_index(daemon_idx);
    ck_assert_int_eq(dlock_lock(holder, "c", 0, NULL, NULL), 0);
    blocked_t b = {.d = d, .name = "c", .result = 1};
    pthread_t t = start_blocked(&b, adm);
    ck_assert_int_eq(dlock_cancel(d), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.result, DLOCK_ECANCELLED);
    ck_assert_str_eq(dlock_err_name(b.result), "CANCELLED");
    /* Nothing held and nothing waiting: once the holder lets go the name is
     * free for a third client, and d stays usable. */
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    ck_assert_int_eq(dlock_unlock(holder, "c", NULL), 0);
    dlock_t *other = open_client();
    ck_assert_int_eq(dlock_trylock(other, "c", H_WAIT_MS, 0, NULL, NULL, NULL), 0);
    dlock_status_t st;
    ck_assert_int_eq(dlock_status(d, "c", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_TAKEN);
    ck_assert_int_eq(dlock_ping(d), 0);
    /* Nothing waits now: a cancel does nothing, and is not kept. */
    ck_assert_int_eq(dlock_cancel(d), 0);
    ck_assert_int_eq(dlock_unlock(other, "c", NULL), 0);
    ck_assert_int_eq(dlock_lock(d, "c", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_unlock(d, "c", NULL), 0);
    h_close(adm);
    dlock_close(other);
    dlock_close(holder);
    dlock_close(d);
}
END_TEST

START_TEST(cancel_withdraws_a_blocked_acquire) {
    dlock_t *holder = open_client(), *d = open_client();
    h_conn_t *adm = h_connect_index(daemon_idx);
    ck_assert_int_eq(dlock_seminit(holder, "cs", 1, NULL), 0);
    ck_assert_int_eq(dlock_acquire(holder, "cs", 1, 0, NULL), 0);
    blocked_t b = {.d = d, .name = "cs", .sem = 1, .result = 1};
    pthread_t t = start_blocked(&b, adm);
    ck_assert_int_eq(dlock_cancel(d), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.result, DLOCK_ECANCELLED);
    dlock_status_t st;
    ck_assert_int_eq(dlock_status(d, "cs", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_SEM);
    ck_assert_uint_eq(st.sem.mine, 0);
    ck_assert_int_eq(dlock_release(holder, "cs", 1, NULL), 0);
    ck_assert_int_eq(dlock_tryacquire(d, "cs", 1, H_WAIT_MS, 0, NULL), 0);
    h_close(adm);
    dlock_close(holder);
    dlock_close(d);
}
END_TEST

/* A blocked AWAIT is withdrawn: no wait is left, the count stays, and the
 * last COUNTDOWN opens the latch for the next AWAIT of the same dlock_t. */
START_TEST(cancel_withdraws_a_blocked_await) {
    dlock_t *setter = open_client(), *d = open_client();
    h_conn_t *adm = h_connect_index(daemon_idx);
    uint32_t n = 9;
    ck_assert_int_eq(dlock_latchset(setter, "cl", 1, NULL), 0);
    blocked_t b = {.d = d, .name = "cl", .latch = 1, .result = 1};
    pthread_t t = start_blocked(&b, adm);
    ck_assert_int_eq(dlock_cancel(d), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.result, DLOCK_ECANCELLED);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    ck_assert_int_eq(dlock_latchcount(d, "cl", &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(dlock_countdown(setter, "cl", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(dlock_await(d, "cl"), 0);
    h_close(adm);
    dlock_close(setter);
    dlock_close(d);
}
END_TEST

/* A child process that awaits name over a connection of its own and exits
 * 0 when dlock_await() answered 0. */
static pid_t spawn_await(const char *name) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int err = 0;
        dlock_t *d = dlock_connect(NULL, &err);
        if (d == NULL) _exit(2);
        _exit(dlock_await(d, name) == 0 ? 0 : 1);
    }
    return pid;
}

/* Count-down latches: the count set once, TRYAWAIT timing out with the
 * count, two waiters released by the last COUNTDOWN only (dlockd still
 * counts them waiting after the first), then an open latch: no latch of
 * the name, AWAIT at once, COUNTDOWN changing nothing. */
START_TEST(latch_set_count_down_await) {
    dlock_t *a = open_client(), *b = open_client();
    h_conn_t *adm = h_connect_index(daemon_idx);
    int set = -1;
    uint32_t n = 9;

    ck_assert_int_eq(dlock_latchcount(a, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(dlock_latchset(a, "l", 2, &set), 0);
    ck_assert_int_eq(set, 1);
    ck_assert_int_eq(dlock_latchset(b, "l", 5, &set), 0);
    ck_assert_int_eq(set, 0);
    ck_assert_int_eq(dlock_latchcount(b, "l", &n), 0);
    ck_assert_uint_eq(n, 2); /* the second LATCHSET changed nothing */

    ck_assert_int_eq(dlock_tryawait(b, "l", 0, &n), DLOCK_ETIMEOUT);
    ck_assert_uint_eq(n, 2);
    long long t0 = h_now_ms();
    n = 9;
    ck_assert_int_eq(dlock_tryawait(b, "l", 200, &n), DLOCK_ETIMEOUT);
    ck_assert_int_ge(h_now_ms() - t0, 190);
    ck_assert_uint_eq(n, 2);

    pid_t w1 = spawn_await("l"), w2 = spawn_await("l");
    h_await_waiters(adm, 2);
    ck_assert_int_eq(dlock_countdown(a, "l", &n), 0);
    ck_assert_uint_eq(n, 1);
    /* Nobody released: both still wait in dlockd. */
    ck_assert_int_eq(h_info_value(adm, "waiters"), 2);
    ck_assert_int_eq(dlock_tryawait(b, "l", 0, &n), DLOCK_ETIMEOUT);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(dlock_countdown(b, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(reap_child(w1), 0);
    ck_assert_int_eq(reap_child(w2), 0);

    /* Open: the latch is gone, and stays open. */
    ck_assert_int_eq(dlock_latchcount(a, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(dlock_await(a, "l"), 0);
    n = 9;
    ck_assert_int_eq(dlock_tryawait(a, "l", 0, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(dlock_countdown(a, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(dlock_latchcount(a, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    /* Set anew, it counts again. */
    ck_assert_int_eq(dlock_latchset(b, "l", 1, &set), 0);
    ck_assert_int_eq(set, 1);
    ck_assert_int_eq(dlock_countdown(b, "l", &n), 0);
    ck_assert_uint_eq(n, 0);
    h_close(adm);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

/* Bad counts and names are refused by the client, the connection goes on;
 * a latch and a lock of one name refuse each other's calls (DLOCK_EKIND). */
START_TEST(latch_errors) {
    dlock_t *a = open_client(), *b = open_client();
    uint32_t n = 9;
    int set = -1;

    ck_assert_int_eq(dlock_latchset(a, "le", 0, &set), DLOCK_EARGS);
    ck_assert_int_eq(dlock_latchset(a, "le", 2147483648u, &set), DLOCK_EARGS);
    ck_assert_int_eq(dlock_latchset(a, "bad name", 1, &set), DLOCK_ENAME);
    ck_assert_int_eq(dlock_countdown(a, "", &n), DLOCK_ENAME);
    ck_assert_int_eq(dlock_await(a, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_tryawait(a, "bad\x01", 0, &n), DLOCK_ENAME);
    ck_assert_int_eq(dlock_latchcount(a, "x y", &n), DLOCK_ENAME);
    ck_assert_int_eq(dlock_ping(a), 0);
    ck_assert_int_eq(dlock_latchcount(a, "le", &n), 0);
    ck_assert_uint_eq(n, 0);

    ck_assert_int_eq(dlock_latchset(a, "le", 1, &set), 0);
    ck_assert_int_eq(dlock_lock(b, "le", 0, NULL, NULL), DLOCK_EKIND);
    ck_assert_int_eq(dlock_lock(a, "lk", 0, NULL, NULL), 0);
    ck_assert_int_eq(dlock_latchset(b, "lk", 1, &set), DLOCK_EKIND);
    ck_assert_int_eq(dlock_countdown(b, "lk", &n), DLOCK_EKIND);
    ck_assert_int_eq(dlock_await(b, "lk"), DLOCK_EKIND);
    ck_assert_int_eq(dlock_tryawait(b, "lk", 0, &n), DLOCK_EKIND);
    ck_assert_int_eq(dlock_ping(b), 0);
    ck_assert_int_eq(dlock_countdown(b, "le", &n), 0);
    ck_assert_uint_eq(n, 0);
    /* The latch gone, its name is free for a lock. */
    ck_assert_int_eq(dlock_lock(b, "le", 0, NULL, NULL), 0);
    dlock_close(a);
    dlock_close(b);
}
END_TEST

/* Multi-name locks: all or nothing, the grant when the last one is freed,
 * reentry, the holds left, a cancelled wait holding nothing, errors. */
START_TEST(mlock_all_or_nothing) {
    dlock_t *holder = open_client(), *d = open_client();
    h_conn_t *adm = h_connect_index(daemon_idx);
    const char *names[] = {"ma", "mb", "mc"};
    uint64_t fb = 0;
    ck_assert_int_eq(dlock_lock(holder, "mb", 0, &fb, NULL), 0);
    blocked_t b = {.d = d, .mn = 3, .mnames = names, .result = 1};
    pthread_t t = start_blocked(&b, adm);
    dlock_status_t st;
    ck_assert_int_eq(dlock_status(holder, "ma", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);
    ck_assert_int_eq(dlock_status(holder, "mc", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);
    ck_assert_int_eq(dlock_unlock(holder, "mb", NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.result, 0);
    ck_assert_uint_gt(b.fences[0], 0);
    ck_assert_uint_gt(b.fences[1], fb);
    ck_assert_uint_gt(b.fences[2], 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(dlock_status(holder, names[i], &st), 0);
        ck_assert_int_eq(st.state, DLOCK_TAKEN);
    }
    /* A name held already is a reentry; munlock tells the holds left. */
    uint64_t fences[2], fa = 0;
    uint32_t left[3];
    ck_assert_int_eq(dlock_munlock(d, 3, names, left), 0);
    ck_assert_uint_eq(left[0] + left[1] + left[2], 0);
    ck_assert_int_eq(dlock_lock(d, "ma", 0, &fa, NULL), 0);
    ck_assert_int_eq(dlock_trymlock(d, 2, names, 0, 0, fences, NULL), 0);
    ck_assert_uint_eq(fences[0], fa);
    ck_assert_int_eq(dlock_munlock(d, 2, names, left), 0);
    ck_assert_uint_eq(left[0], 1);
    ck_assert_uint_eq(left[1], 0);
    ck_assert_int_eq(dlock_munlock(d, 2, names, left), DLOCK_ENOTHELD);
    ck_assert_int_eq(dlock_status(d, "ma", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_MINE); /* NOTHELD released nothing */
    ck_assert_int_eq(dlock_unlock(d, "ma", NULL), 0);
    /* TRYMLOCK times out holding nothing. */
    long long ttl = 0;
    ck_assert_int_eq(dlock_lock(holder, "mc", 60000, NULL, NULL), 0);
    ck_assert_int_eq(dlock_trymlock(d, 3, names, 50, 0, fences, &ttl), DLOCK_ETIMEOUT);
    ck_assert_int_gt(ttl, 0);
    ck_assert_int_eq(dlock_status(d, "ma", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);
    /* A waiting MLOCK cancelled: nothing held, nothing waiting. */
    blocked_t c = {.d = d, .mn = 3, .mnames = names, .result = 1};
    t = start_blocked(&c, adm);
    ck_assert_int_eq(dlock_cancel(d), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(c.result, DLOCK_ECANCELLED);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    ck_assert_int_eq(dlock_status(holder, "ma", &st), 0);
    ck_assert_int_eq(st.state, DLOCK_FREE);
    ck_assert_int_eq(dlock_unlock(holder, "mc", NULL), 0);
    ck_assert_int_eq(dlock_mlock(d, 3, names, 0, NULL), 0);
    h_close(adm);
    dlock_close(holder);
    dlock_close(d);
}
END_TEST

START_TEST(mlock_errors) {
    dlock_t *d = open_client();
    const char *dup[] = {"x", "y", "x"}, *bad[] = {"x", "a b"};
    const char *many[DLOCK_MNAMES_MAX + 1];
    char names[DLOCK_MNAMES_MAX + 1][8];
    for (int i = 0; i <= DLOCK_MNAMES_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "n%d", i);
        many[i] = names[i];
    }
    ck_assert_int_eq(dlock_mlock(d, 0, many, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_mlock(d, DLOCK_MNAMES_MAX + 1, many, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_mlock(d, 3, dup, 0, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_mlock(d, 2, bad, 0, NULL), DLOCK_ENAME);
    ck_assert_int_eq(dlock_mlock(d, 2, dup, 2147483648u, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_munlock(d, 3, dup, NULL), DLOCK_EARGS);
    ck_assert_int_eq(dlock_ping(d), 0);
    uint64_t fences[DLOCK_MNAMES_MAX];
    uint32_t left[DLOCK_MNAMES_MAX];
    ck_assert_int_eq(dlock_mlock(d, DLOCK_MNAMES_MAX, many, 0, fences), 0);
    ck_assert_int_eq(dlock_munlock(d, DLOCK_MNAMES_MAX, many, left), 0);
    ck_assert_uint_eq(left[DLOCK_MNAMES_MAX - 1], 0);
    /* 64 names of 255 bytes do not fit a request line. */
    static char longn[DLOCK_MNAMES_MAX][DLOCK_NAME_MAX + 1];
    const char *longs[DLOCK_MNAMES_MAX];
    for (int i = 0; i < DLOCK_MNAMES_MAX; i++) {
        memset(longn[i], 'a' + i % 26, DLOCK_NAME_MAX);
        longn[i][0] = (char)('0' + i / 26);
        longs[i] = longn[i];
    }
    ck_assert_int_eq(dlock_mlock(d, DLOCK_MNAMES_MAX, longs, 0, NULL), DLOCK_ETOOLONG);
    ck_assert_int_eq(dlock_ping(d), 0);
    dlock_close(d);
}
END_TEST

static dlock_t *cancel_from_handler;

static void on_alarm(int sig) {
    (void)sig;
    dlock_cancel(cancel_from_handler);
}

START_TEST(cancel_from_a_signal_handler) {
    dlock_t *holder = open_client(), *d = open_client();
    ck_assert_int_eq(dlock_lock(holder, "cg", 0, NULL, NULL), 0);
    cancel_from_handler = d;
    struct sigaction sa = {.sa_handler = on_alarm};
    ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
    /* The handler runs every 20 ms (a cancel while nothing waits does
     * nothing), so the lock waits until the first one after its request. */
    struct itimerval every = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
    ck_assert_int_eq(setitimer(ITIMER_REAL, &every, NULL), 0);
    int r = dlock_lock(d, "cg", 0, NULL, NULL);
    ck_assert_int_eq(setitimer(ITIMER_REAL, &off, NULL), 0);
    ck_assert_int_eq(r, DLOCK_ECANCELLED);
    ck_assert_int_eq(dlock_ping(d), 0);
    dlock_close(holder);
    dlock_close(d);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("libdlock");
    TCase *tc = tcase_create("client");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, lock_reenter_unlock);
    tcase_add_test(tc, mlock_all_or_nothing);
    tcase_add_test(tc, mlock_errors);
    tcase_add_test(tc, trylock_status_renew);
    tcase_add_test(tc, lost_event_through_poll);
    tcase_add_test(tc, event_met_while_waiting_for_reply);
    tcase_add_test(tc, event_read_with_the_reply);
    tcase_add_test(tc, errors_and_names);
    tcase_add_test(tc, bad_name_error_shows_it);
    tcase_add_test(tc, close_releases_and_daemon_loss_is_seen);
    tcase_add_test(tc, connect_error_names_socket);
    tcase_add_test(tc, connect_permission_denied_hints);
    tcase_add_test(tc, read_write_locks);
    tcase_add_test(tc, read_write_errors);
    tcase_add_test(tc, semaphore_permits);
    tcase_add_test(tc, semaphore_waiters_are_woken);
    tcase_add_test(tc, semaphore_close_and_lease);
    tcase_add_test(tc, semaphore_kind_errors);
    tcase_add_test(tc, semaphore_force_unlock);
    tcase_add_test(tc, semaphore_errors);
    tcase_add_test(tc, fair_lock_reenter_unlock);
    tcase_add_test(tc, fair_trylock_times_out_and_leaves);
    tcase_add_test(tc, fair_waiters_in_order);
    tcase_add_test(tc, fair_closed_waiter_lets_next_go);
    tcase_add_test(tc, fair_kind_errors);
    tcase_add_test(tc, fair_lock_errors);
    tcase_add_test(tc, cancel_withdraws_a_blocked_lock);
    tcase_add_test(tc, cancel_withdraws_a_blocked_acquire);
    tcase_add_test(tc, cancel_from_a_signal_handler);
    tcase_add_test(tc, cancel_withdraws_a_blocked_await);
    tcase_add_test(tc, latch_set_count_down_await);
    tcase_add_test(tc, latch_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
