/* Integration tests of hand-overs (issue 39): SIGUSR2 under load with every kind of hold and wait, on standalone and on a Cluster; dlockd --upgrade; the attempts that fail; what an attacker tries.
 * SPDX-License-Identifier: MIT
 *
 * A hand-over must cost the clients nothing: no connection closed, no
 * !LOST, every hold with its fence, count and lease, every wait with its
 * place and its time left, tagged requests and half-sent lines, observers,
 * counters. The scenario builds all of that, hands over three times in a
 * row while eight connections loop LOCK/UNLOCK, then releases the holders
 * one by one and checks who is granted next. A new binary that cannot take
 * over (exits at once, not executable, a state version it does not know)
 * changes nothing. Then the attackers: a quorum, read/write locks and a
 * latch, replies a client does not read, a client that closes and a
 * SIGTERM in the middle of a hand-over, Redis stopped with a request in
 * flight, a short lease across many hand-overs. Orders are checked by
 * what comes next on a connection after a step that can cause only one
 * answer, never by waiting a while; the only waits are the ones the test
 * is about (a lease, a TRY's wait, a latch that must not open). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* A short lease, so that holds outlive several of them across the
 * hand-overs: a new process that did not take the watchdog over loses
 * them (!LOST, or STATUS FREE). */
#define LEASE_MS        3000
#define LEASE_CONF      "[lock]\nlease_ms = 3000\n"
#define HOLDERS         50
#define WAITERS         10      /* queued behind holder 0, on its name */
#define LOAD_CONNS      8
#define LOAD_PAIRS      20      /* pairs the load makes after each hand-over */
#define HANDOVERS       3
#define OWN_LEASE_MS    20000   /* a hold with a lease of its own */
/* The TRY with a deadline: sent before everything else, it must not be
 * answered before TRY_WAIT_MS, and the hand-overs start halfway through,
 * so that a new process that counted its wait again from the start would
 * answer it past TRY_WAIT_MS + TRY_LATE_MS. */
#define TRY_WAIT_MS     6000
#define TRY_LATE_MS     2500    /* a busy machine's pause, at most */
#define TRY_EARLY_MS    10      /* the loop's clock against ours */
/* Requests waiting in the daemon: WAITERS, the two TRYs, the tagged LOCK,
 * two fair waiters, the ELECT candidate, the semaphore's waiter, MLOCK. */
#define QUEUED          (WAITERS + 8)

#define KEEP(d) h_keep_log((d), "upgrade.%s.dlockd%d", tcase_name(), (d))

/* ---- steps ------------------------------------------------------------------------------- */

static unsigned long long fence_max; /* the greatest fence granted before the hand-overs */

/* The next line on c is a grant, "OK <fence>" and maybe more; returns
 * the fence. */
static unsigned long long granted(h_conn_t *c, const char *what) {
    const char *l = h_recv(c, H_WAIT_MS);
    unsigned long long fence = 0;
    ck_assert_msg(l != NULL, "%s: no reply", what);
    ck_assert_msg(sscanf(l, "OK %llu", &fence) == 1 && fence > 0, "%s: got '%s', wanted a grant",
                  what, l);
    return fence;
}

/* Sends request and wants a grant; returns its fence. */
static unsigned long long lock_ok(h_conn_t *c, const char *request) {
    h_send(c, "%s\n", request);
    return granted(c, request);
}

/* A grant made after the hand-overs: its fence is above every fence
 * granted before them. */
static unsigned long long granted_after(h_conn_t *c, const char *what) {
    unsigned long long f = granted(c, what);
    ck_assert_msg(f > fence_max, "%s: fence %llu, not above %llu granted before the hand-overs",
                  what, f, fence_max);
    return f;
}

static void expect(h_conn_t *c, const char *want, const char *what) {
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "%s: no reply, wanted '%s'", what, want);
    ck_assert_msg(strcmp(l, want) == 0, "%s: got '%s', wanted '%s'", what, l, want);
}

/* Sends request, which must wait: INFO's waiters goes up by one. */
static void queue(h_conn_t *adm, h_conn_t *c, const char *request) {
    long long before = h_info_value(adm, "waiters");
    h_send(c, "%s\n", request);
    h_await_waiters(adm, before + 1);
}

/* Nothing came on c, and it is open: no reply, no event (!LOST). */
static void quiet(h_conn_t *c, const char *who) {
    ck_assert_msg(!h_eof(c, 0), "%s: its connection was closed", who);
    const char *l = h_recv(c, 0);
    ck_assert_msg(l == NULL, "%s: got '%s', wanted nothing", who, l ? l : "");
}

/* STATUS of a plain lock c holds: holds as given, a lease left, the same
 * fence. Returns the ttl. */
static long long holds(h_conn_t *c, const char *name, int count, unsigned long long fence) {
    long long n = 0, ttl = 0;
    unsigned long long f = 0;
    char tail;
    h_send(c, "STATUS %s\n", name);
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "STATUS %s: no reply", name);
    ck_assert_msg(sscanf(l, "OK MINE %lld %lld %llu%c", &n, &ttl, &f, &tail) == 3,
                  "STATUS %s: got '%s', wanted 'OK MINE %d <ttl> %llu'", name, l, count, fence);
    ck_assert_msg(n == count && f == fence && ttl > 0,
                  "STATUS %s: got '%s', wanted 'OK MINE %d <ttl> %llu'", name, l, count, fence);
    return ttl;
}

/* The number after " key=" in an INFO line (which must have it). */
static long long info_of(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    ck_assert_msg(p != NULL, "INFO lacks %s: %s", key, line);
    return atoll(p + strlen(pat));
}

/* ---- the load: 8 connections looping LOCK/UNLOCK, in a child process ---------------------- */

typedef struct load_s {
    atomic_llong pairs;         /* LOCK/UNLOCK pairs answered as wanted */
    atomic_llong fence_max;     /* the greatest fence a LOCK got */
    atomic_llong errors;        /* replies not wanted, events, closes, silences */
    atomic_llong slowest_us;    /* the longest wait for one reply */
    char first_error[512];
} load_t;

typedef struct load_run_s {
    load_t *shared;             /* mapped in both processes */
    pid_t pid;
    int stop;                   /* closed to stop it */
} load_run_t;

typedef struct load_conn_s {
    int fd;
    char buf[512];
    size_t len;
    int state;                  /* 0 LOCK sent, 1 UNLOCK sent, 2 idle, 3 closed */
    long long sent_us;
    unsigned long long fence;   /* its last grant's */
} load_conn_t;

static void load_error(load_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void load_error(load_t *ld, const char *fmt, ...) {
    if (atomic_fetch_add(&ld->errors, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ld->first_error, sizeof(ld->first_error), fmt, ap);
        va_end(ap);
    }
}

static void load_send(load_t *ld, load_conn_t *c, int i, int state) {
    char req[64];
    int n = snprintf(req, sizeof(req), "%s load%d\n", state == 0 ? "LOCK" : "UNLOCK", i);
    if (write(c->fd, req, (size_t)n) != n) {
        load_error(ld, "load%d: write: %s", i, strerror(errno));
        c->state = 3;
        return;
    }
    c->state = state;
    c->sent_us = h_now_us();
}

/* One reply line on connection i. */
static void load_line(load_t *ld, load_conn_t *c, int i, const char *l, int stopping) {
    unsigned long long f = 0;
    long long holds = 0;
    char tail;
    long long waited = h_now_us() - c->sent_us;
    if (waited > atomic_load(&ld->slowest_us)) atomic_store(&ld->slowest_us, waited);
    if (c->state == 0) {
        if (sscanf(l, "OK %llu %lld%c", &f, &holds, &tail) != 2 || holds != 1) {
            load_error(ld, "LOCK load%d: got '%s'", i, l);
        } else if (f <= c->fence) {
            load_error(ld, "LOCK load%d: fence %llu after %llu", i, f, c->fence);
        } else {
            c->fence = f;
            if ((long long)f > atomic_load(&ld->fence_max)) atomic_store(&ld->fence_max, (long long)f);
        }
        load_send(ld, c, i, 1);
    } else if (c->state == 1) {
        if (strcmp(l, "OK 0") != 0) load_error(ld, "UNLOCK load%d: got '%s'", i, l);
        else atomic_fetch_add(&ld->pairs, 1);
        if (stopping) c->state = 2;
        else load_send(ld, c, i, 0);
    } else {
        load_error(ld, "load%d: '%s' with nothing asked", i, l);
    }
}

/* The child's loop: stops asking once stop_fd ends, and exits when every
 * connection is idle. Never ck_assert here: it is not the test's process. */
static void load_loop(load_t *ld, const int fds[], int stop_fd) {
    load_conn_t c[LOAD_CONNS];
    int stopping = 0;
    long long stop_by = 0;
    for (int i = 0; i < LOAD_CONNS; i++) {
        c[i] = (load_conn_t){.fd = fds[i]};
        load_send(ld, &c[i], i, 0);
    }
    for (;;) {
        struct pollfd p[LOAD_CONNS + 1];
        int busy = 0;
        for (int i = 0; i < LOAD_CONNS; i++) {
            p[i] = (struct pollfd){.fd = c[i].state < 2 ? c[i].fd : -1, .events = POLLIN};
            if (c[i].state < 2) {
                busy++;
                if (h_now_us() - c[i].sent_us > (long long)H_WAIT_MS * 1000) {
                    load_error(ld, "load%d: no reply within %d ms", i, H_WAIT_MS);
                    c[i].state = 3;
                }
            }
        }
        if (stopping && (busy == 0 || h_now_ms() > stop_by)) return;
        p[LOAD_CONNS] = (struct pollfd){.fd = stopping ? -1 : stop_fd, .events = POLLIN};
        if (poll(p, LOAD_CONNS + 1, 100) < 0 && errno != EINTR) return;
        if (p[LOAD_CONNS].revents != 0) {
            stopping = 1;
            stop_by = h_now_ms() + H_WAIT_MS;
        }
        for (int i = 0; i < LOAD_CONNS; i++) {
            if (p[i].revents == 0 || c[i].state >= 2) continue;
            ssize_t n = read(c[i].fd, c[i].buf + c[i].len, sizeof(c[i].buf) - c[i].len);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                load_error(ld, "load%d: connection closed (%s)", i, n == 0 ? "EOF" : strerror(errno));
                c[i].state = 3;
                continue;
            }
            c[i].len += (size_t)n;
            char *lf;
            while (c[i].state < 2 && (lf = memchr(c[i].buf, '\n', c[i].len)) != NULL) {
                *lf = '\0';
                if (c[i].buf[0] == '!') load_error(ld, "load%d: event '%s'", i, c[i].buf);
                else load_line(ld, &c[i], i, c[i].buf, stopping);
                size_t used = (size_t)(lf - c[i].buf) + 1;
                memmove(c[i].buf, lf + 1, c[i].len - used);
                c[i].len -= used;
            }
            if (c[i].len == sizeof(c[i].buf)) {
                load_error(ld, "load%d: a line past %zu bytes", i, sizeof(c[i].buf));
                c[i].state = 3;
            }
        }
    }
}

/* Connects LOAD_CONNS clients to dlockd d (here, where a failure is the
 * test's) and starts the loop in a child. */
static load_run_t load_start(int d) {
    load_run_t run;
    int fds[LOAD_CONNS], stop[2];
    run.shared = mmap(NULL, sizeof(load_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
    ck_assert_msg(run.shared != MAP_FAILED, "mmap: %s", strerror(errno));
    memset(run.shared, 0, sizeof(load_t));
    h_conn_t *conns[LOAD_CONNS];
    for (int i = 0; i < LOAD_CONNS; i++) {
        conns[i] = h_connect_index(d);
        fds[i] = conns[i]->fd;
    }
    ck_assert_int_eq(pipe(stop), 0);
    run.pid = fork();
    ck_assert_int_ge(run.pid, 0);
    if (run.pid == 0) {
        close(stop[1]);
        load_loop(run.shared, fds, stop[0]);
        _exit(0);
    }
    close(stop[0]);
    run.stop = stop[1];
    for (int i = 0; i < LOAD_CONNS; i++) h_close(conns[i]); /* the child's copies stay open */
    return run;
}

static void load_check(const load_run_t *run) {
    long long errors = atomic_load(&run->shared->errors);
    ck_assert_msg(errors == 0, "the load saw %lld errors, the first: %s", errors,
                  run->shared->first_error);
}

/* Waits until the load made n pairs in all. */
static void load_await(const load_run_t *run, long long n) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (atomic_load(&run->shared->pairs) < n) {
        load_check(run);
        ck_assert_msg(h_now_ms() < end, "the load made %lld pairs, wanted %lld",
                      (long long)atomic_load(&run->shared->pairs), n);
        usleep(2000);
    }
    load_check(run);
}

/* Stops the load once each connection's pair is done. */
static void load_stop(load_run_t *run) {
    int status;
    close(run->stop);
    ck_assert_int_eq(waitpid(run->pid, &status, 0), run->pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the load ended with %d", status);
    load_check(run);
}

/* ---- the scenario -------------------------------------------------------------------------- */

/* Every kind of hold and wait on dlockd d, three hand-overs under load,
 * then every promise checked. */
static void scenario(int d) {
    h_conn_t *adm = h_connect_index(d);
    char info[H_LINE_MAX];
    fence_max = 0;
#define NOTE(f) do { unsigned long long f_ = (f); if (f_ > fence_max) fence_max = f_; } while (0)

    /* The TRY with a deadline first: its name held by try_holder. */
    h_conn_t *try_holder = h_connect_index(d), *try_late = h_connect_index(d);
    unsigned long long try_fence = lock_ok(try_holder, "LOCK try");
    NOTE(try_fence);
    char try_req[64];
    snprintf(try_req, sizeof(try_req), "TRYLOCK try %d", TRY_WAIT_MS);
    long long try_sent = h_now_ms();
    queue(adm, try_late, try_req);

    /* 50 holders, each with its fence; holder 3 holds twice, one more
     * holds with a lease of its own. */
    h_conn_t *holder[HOLDERS];
    unsigned long long fence[HOLDERS];
    char req[128], name[64];
    for (int i = 0; i < HOLDERS; i++) {
        holder[i] = h_connect_index(d);
        snprintf(req, sizeof(req), "LOCK h%d", i);
        fence[i] = lock_ok(holder[i], req);
        NOTE(fence[i]);
    }
    h_send(holder[3], "LOCK h3\n");
    snprintf(req, sizeof(req), "OK %llu 2", fence[3]);
    expect(holder[3], req, "holder 3's reentry");
    h_conn_t *leased = h_connect_index(d);
    snprintf(req, sizeof(req), "LOCK leased %d", OWN_LEASE_MS);
    unsigned long long leased_fence = lock_ok(leased, req);
    long long leased_at = h_now_ms();
    NOTE(leased_fence);

    /* 10 waiters queued behind holder 0, in order; a TRY with a long
     * wait behind holder 1; a tagged LOCK behind holder 2, while the
     * connection's other tagged requests are answered; an MLOCK of holder
     * 4's name and a free one. */
    h_conn_t *waiter[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        waiter[i] = h_connect_index(d);
        queue(adm, waiter[i], "LOCK h0");
    }
    h_send(waiter[WAITERS - 1], "PING\n"); /* read and kept behind the wait, unparsed */
    h_conn_t *try_long = h_connect_index(d), *tagged = h_connect_index(d);
    h_conn_t *multi = h_connect_index(d);
    queue(adm, try_long, "TRYLOCK h1 60000");
    queue(adm, tagged, "#w LOCK h2");
    h_send(tagged, "#p PING\n");
    expect(tagged, "#p OK PONG", "a tagged PING beside a tagged wait");
    queue(adm, multi, "MLOCK 2 h4 mfree");

    /* A fair lock with two waiters in its queue. */
    h_conn_t *fair[3];
    for (int i = 0; i < 3; i++) fair[i] = h_connect_index(d);
    unsigned long long fair_fence = lock_ok(fair[0], "FAIRLOCK fair");
    NOTE(fair_fence);
    queue(adm, fair[1], "FAIRLOCK fair");
    queue(adm, fair[2], "FAIRLOCK fair");

    /* An election: an observer, a leader, a candidate. */
    h_conn_t *observer = h_connect_index(d), *leader = h_connect_index(d);
    h_conn_t *candidate = h_connect_index(d);
    h_expect_reply(observer, "OBSERVE el", "OK NONE");
    unsigned long long lead_fence = lock_ok(leader, "ELECT el one");
    NOTE(lead_fence);
    snprintf(req, sizeof(req), "!LEADER el %llu one", lead_fence);
    h_expect_event(observer, req, H_WAIT_MS, "the observer told of the leader");
    queue(adm, candidate, "ELECT el two");

    /* A semaphore of 3 permits all held, and a waiter for one. */
    h_conn_t *sem = h_connect_index(d), *sem_waiter = h_connect_index(d);
    h_expect_reply(sem, "SEMINIT sem 3", "OK 1");
    h_expect_reply(sem, "ACQUIRE sem 3", "OK 3");
    queue(adm, sem_waiter, "ACQUIRE sem 1");
    h_await_waiters(adm, QUEUED);

    /* The load, and the counters before. */
    h_conn_t *partial = h_connect_index(d);
    load_run_t load = load_start(d);
    load_await(&load, LOAD_PAIRS);
    NOTE((unsigned long long)atomic_load(&load.shared->fence_max));
    snprintf(info, sizeof(info), "%s", h_info_line(d));
    long long pid0 = info_of(info, "pid"), upgrades0 = info_of(info, "upgrades");
    long long grants0 = info_of(info, "grants"), requests0 = info_of(info, "requests");
    long long accepted0 = info_of(info, "connections_total");
    long long connections0 = info_of(info, "connections");
    ck_assert_int_eq(pid0, h_dlockd_pid(d));
    ck_assert_int_eq(upgrades0, 0);
    ck_assert_int_eq(info_of(info, "upgrade_failures"), 0);

    /* The TRY is not answered before its deadline; the hand-overs start
     * halfway through its wait. */
    long long half = try_sent + TRY_WAIT_MS / 2 - h_now_ms();
    if (half > 0) h_expect_silence(try_late, (int)half, "the TRY before its deadline");

    /* Three hand-overs in a row, each with a half-sent line whose rest
     * comes after it: "LOCK pa" is read by the old process (its PING,
     * in the same write, was answered), "rt<k>" by the new one. */
    long long first_upgrade = h_now_ms(), last_upgrade = 0;
    pid_t pid = (pid_t)pid0;
    unsigned long long part_fence[HANDOVERS];
    for (int k = 0; k < HANDOVERS; k++) {
        h_send(partial, "PING\nLOCK pa");
        expect(partial, "OK PONG", "the PING before a half-sent line");
        long long pairs = atomic_load(&load.shared->pairs);
        last_upgrade = h_now_ms();
        pid_t next = h_dlockd_upgrade(d);
        ck_assert_msg(next != pid, "hand-over %d: pid %d again", k + 1, (int)pid);
        snprintf(req, sizeof(req), "upgrade: took over from pid %d:", (int)pid);
        ck_assert_msg(h_log_count(d, req) == 1, "the log lacks '%s'", req);
        snprintf(req, sizeof(req), "upgrade: pid %d took over", (int)next);
        ck_assert_msg(h_log_count(d, req) == 1, "the log lacks '%s'", req);
        pid = next;
        h_send(partial, "rt%d\n", k);
        snprintf(req, sizeof(req), "LOCK part%d completed after hand-over %d", k, k + 1);
        part_fence[k] = granted_after(partial, req);
        load_await(&load, pairs + LOAD_PAIRS);
    }

    /* The counters went on; the pid is the last new one. */
    snprintf(info, sizeof(info), "%s", h_info_line(d));
    ck_assert_int_eq(info_of(info, "pid"), pid);
    ck_assert_int_eq(info_of(info, "upgrades"), HANDOVERS);
    ck_assert_int_eq(info_of(info, "upgrade_failures"), 0);
    ck_assert_msg(info_of(info, "grants") > grants0 && info_of(info, "requests") > requests0 &&
                  info_of(info, "connections_total") >= accepted0 &&
                  info_of(info, "connections") >= connections0,
                  "counters went back: before pid=%lld grants=%lld requests=%lld "
                  "connections_total=%lld connections=%lld; after: %s",
                  pid0, grants0, requests0, accepted0, connections0, info);
    ck_assert_msg(info_of(info, "upgrade_state_bytes") > 0 && info_of(info, "upgrade_ms") >= 0,
                  "INFO after the hand-overs: %s", info);
    printf("upgrade (%s): last hand-over %lld ms, %lld bytes of state; the load's slowest "
           "reply %lld ms\n", tcase_name(), info_of(info, "upgrade_ms"),
           info_of(info, "upgrade_state_bytes"),
           (long long)atomic_load(&load.shared->slowest_us) / 1000);
    ck_assert_msg(info_of(info, "lost") == 0, "INFO after the hand-overs: %s", info);

    /* The load saw no error, no close, no event. Stopped, its LOCKs in
     * flight no longer count among INFO's waiters (below). */
    load_stop(&load);

    /* The TRY times out at its deadline, neither before nor counted again
     * from a hand-over. */
    h_send(try_late, "PING\n"); /* answered after the TRY's reply */
    const char *l = h_recv(try_late, (int)(try_sent + TRY_WAIT_MS + TRY_LATE_MS - h_now_ms()));
    long long try_took = h_now_ms() - try_sent;
    ck_assert_msg(l != NULL, "%s: no reply after %lld ms", try_req, try_took);
    ck_assert_msg(strncmp(l, "TIMEOUT ", 8) == 0, "%s: got '%s'", try_req, l);
    ck_assert_msg(try_took >= TRY_WAIT_MS - TRY_EARLY_MS, "%s timed out after %lld ms", try_req,
                  try_took);
    expect(try_late, "OK PONG", "the PING behind the TRY");

    /* Every hold outlived more than a lease since the first hand-over
     * without a !LOST: the watchdog went on in the new processes. */
    long long left = first_upgrade + LEASE_MS + LEASE_MS / 2 - h_now_ms();
    if (last_upgrade + LEASE_MS - h_now_ms() > left) left = last_upgrade + LEASE_MS - h_now_ms();
    if (left > 0) h_expect_silence(holder[0], (int)left, "holder 0 across a lease");
    quiet(try_holder, "the TRY's holder");
    for (int i = 0; i < HOLDERS; i++) {
        snprintf(name, sizeof(name), "holder %d", i);
        quiet(holder[i], name);
    }
    for (int i = 0; i < WAITERS; i++) {
        snprintf(name, sizeof(name), "waiter %d", i);
        quiet(waiter[i], name);
    }
    quiet(leased, "the leased holder");
    quiet(try_long, "the long TRY");
    quiet(tagged, "the tagged LOCK");
    quiet(multi, "the MLOCK");
    for (int i = 0; i < 3; i++) quiet(fair[i], i == 0 ? "the fair holder" : "a fair waiter");
    quiet(observer, "the observer");
    quiet(leader, "the leader");
    quiet(candidate, "the candidate");
    quiet(sem, "the semaphore's holder");
    quiet(sem_waiter, "the semaphore's waiter");
    quiet(partial, "the half-sent lines' connection");
    h_await_waiters(adm, QUEUED - 1); /* all but the TRY that timed out */

    /* Every hold is there with its fence and count; the own lease was
     * not renewed (nor started again) by a hand-over. */
    holds(try_holder, "try", 1, try_fence);
    for (int i = 0; i < HOLDERS; i++) {
        snprintf(name, sizeof(name), "h%d", i);
        holds(holder[i], name, i == 3 ? 2 : 1, fence[i]);
    }
    long long ttl = holds(leased, "leased", 1, leased_fence), since = h_now_ms() - leased_at;
    ck_assert_msg(ttl <= OWN_LEASE_MS - since + 200 && ttl >= OWN_LEASE_MS - since - 1500,
                  "the hold leased %d ms has %lld ms left after %lld ms", OWN_LEASE_MS, ttl,
                  since);
    for (int k = 0; k < HANDOVERS; k++) {
        snprintf(name, sizeof(name), "part%d", k);
        holds(partial, name, 1, part_fence[k]);
    }
    holds(fair[0], "fair", 1, fair_fence);
    h_expect_reply(sem, "STATUS sem", "OK SEM 0 3");
    h_send(tagged, "#q STATUS h2\n");
    l = h_recv(tagged, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "#q OK TAKEN ", 12) == 0,
                  "#q STATUS h2 beside the tagged wait: got '%s'", l ? l : "(nothing)");
    snprintf(req, sizeof(req), "OK %llu one", lead_fence);
    h_expect_reply(adm, "LEADER el", req);

    /* Releases: holder 0's waiters are granted in their order, one at a
     * time, each fence above the last. */
    unsigned long long last = fence_max;
    h_expect_reply(holder[0], "UNLOCK h0", "OK 0");
    for (int i = 0; i < WAITERS; i++) {
        snprintf(name, sizeof(name), "waiter %d of h0", i);
        unsigned long long f = granted_after(waiter[i], name);
        ck_assert_msg(f > last, "%s: fence %llu after %llu", name, f, last);
        last = f;
        for (int j = i + 1; j < WAITERS; j++) {
            snprintf(name, sizeof(name), "waiter %d, behind waiter %d", j, i);
            quiet(waiter[j], name);
        }
        if (i == WAITERS - 1) expect(waiter[i], "OK PONG", "the PING sent behind the last wait");
        h_expect_reply(waiter[i], "UNLOCK h0", "OK 0");
    }
    h_expect_reply(holder[1], "UNLOCK h1", "OK 0");
    granted_after(try_long, "TRYLOCK h1 60000");
    h_expect_reply(holder[2], "UNLOCK h2", "OK 0");
    l = h_recv(tagged, H_WAIT_MS);
    unsigned long long tf = 0;
    ck_assert_msg(l != NULL && sscanf(l, "#w OK %llu 1", &tf) == 1 && tf > fence_max,
                  "#w LOCK h2 after holder 2's release: got '%s'", l ? l : "(nothing)");
    quiet(tagged, "the tagged LOCK, answered once");
    h_expect_reply(holder[4], "UNLOCK h4", "OK 0");
    l = h_recv(multi, H_WAIT_MS);
    unsigned long long m1 = 0, m2 = 0;
    ck_assert_msg(l != NULL && sscanf(l, "OK %llu %llu", &m1, &m2) == 2 && m1 > fence_max &&
                  m2 > fence_max, "MLOCK 2 h4 mfree after holder 4's release: got '%s'",
                  l ? l : "(nothing)");

    /* The fair lock's queue, in its order. */
    h_expect_reply(fair[0], "UNLOCK fair", "OK 0");
    granted_after(fair[1], "the first fair waiter");
    quiet(fair[2], "the second fair waiter, behind the first");
    h_expect_reply(fair[1], "UNLOCK fair", "OK 0");
    granted_after(fair[2], "the second fair waiter");

    /* The election: the candidate leads when the leader resigns, and the
     * observer hears it (maybe after a NONE). */
    h_expect_reply(leader, "RESIGN el", "OK 1");
    unsigned long long next_lead = granted_after(candidate, "ELECT el two");
    snprintf(req, sizeof(req), "!LEADER el %llu two", next_lead);
    l = h_recv(observer, H_WAIT_MS);
    if (l != NULL && strcmp(l, "!LEADER el NONE") == 0) l = h_recv(observer, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, req) == 0, "the observer: got '%s', wanted '%s'",
                  l ? l : "(nothing)", req);

    /* The semaphore's waiter takes the permit given back. */
    h_expect_reply(sem, "RELEASE sem 1", "OK 2");
    expect(sem_waiter, "OK 1", "ACQUIRE sem 1 after a RELEASE");

    /* The grants went on. */
    ck_assert_int_gt(info_of(h_info_line(d), "grants"), info_of(info, "grants"));
    h_close(adm);
    h_close(try_holder);
    h_close(try_late);
    for (int i = 0; i < HOLDERS; i++) h_close(holder[i]);
    for (int i = 0; i < WAITERS; i++) h_close(waiter[i]);
    h_close(leased);
    h_close(try_long);
    h_close(tagged);
    h_close(multi);
    for (int i = 0; i < 3; i++) h_close(fair[i]);
    h_close(observer);
    h_close(leader);
    h_close(candidate);
    h_close(sem);
    h_close(sem_waiter);
    h_close(partial);
#undef NOTE
}

START_TEST(standalone_under_load) {
    h_redis_start();
    int d = h_dlockd_start(LEASE_CONF);
    KEEP(d);
    scenario(d);
    h_keep_passed();
}
END_TEST

/* A dlockd on the running cluster; waits until every primary is up. */
static int start_cluster_dlockd(void) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\ncluster = %s\n"
             "command_timeout_ms = 2000\nconnect_timeout_ms = 500\n" LEASE_CONF,
             h_cluster_addrs());
    int d = h_dlockd_start_conf(text);
    h_conn_t *c = h_connect_index(d);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        long long n = h_info_value(c, "redis_nodes"), up = h_info_value(c, "redis_nodes_up");
        if (n > 0 && n == up) break;
        ck_assert_msg(h_now_ms() < end, "dlockd %d: %lld of %lld primaries up", d, up, n);
        usleep(10000);
    }
    h_close(c);
    return d;
}

START_TEST(cluster_under_load) {
    h_cluster_start(3, 0);
    int d = start_cluster_dlockd();
    KEEP(d);
    scenario(d);
    h_keep_passed();
}
END_TEST

/* ---- dlockd --upgrade ---------------------------------------------------------------------- */

static const char *dlockd_bin(void) {
    const char *b = getenv("DLOCKD_BIN");
    return b != NULL ? b : "build/dlockd";
}

/* Runs bin --upgrade -c <d's config> -s sock; its exit status, and its
 * output (stdout and stderr) in out. */
static int upgrade_command(const char *bin, int d, const char *sock, char *out, size_t len) {
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        execl(bin, bin, "--upgrade", "-c", h_dlockd_conf(d), "-s", sock, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && (n = read(p[0], out + got, len - 1 - got)) > 0) got += (size_t)n;
    close(p[0]);
    out[got] = '\0';
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Copies the daemon's binary into h_dir(), where the test may replace it
 * or take its x bit: path gets the copy's path. */
static void copy_bin(char *path, size_t len) {
    h_public_copy(dlockd_bin(), path, len);
}

/* Puts a file with text (or, text NULL, a copy of the daemon's binary)
 * at path, mode 0755, by rename: the old file may be running. */
static void replace_file(const char *path, const char *text) {
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    unlink(tmp);
    if (text == NULL) {
        int in = open(dlockd_bin(), O_RDONLY | O_CLOEXEC);
        ck_assert_msg(in >= 0, "open %s: %s", dlockd_bin(), strerror(errno));
        int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        ck_assert_msg(out >= 0, "create %s: %s", tmp, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
            ck_assert_msg(write(out, buf, (size_t)n) == n, "write %s: %s", tmp, strerror(errno));
        close(in);
        ck_assert_int_eq(close(out), 0);
    } else {
        FILE *f = fopen(tmp, "w");
        ck_assert_msg(f != NULL, "create %s: %s", tmp, strerror(errno));
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
    }
    ck_assert_int_eq(chmod(tmp, 0755), 0);
    ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/* dlockd --upgrade hands over and says to whom; a failed attempt exits 1
 * and says the old pid serves on; no daemon on the socket exits 1. */
START_TEST(upgrade_command_says_what_happened) {
    char bin[600], out[4096], want[128];
    h_redis_start();
    copy_bin(bin, sizeof(bin));
    int d = h_dlockd_start_bin(bin, LEASE_CONF);
    KEEP(d);
    h_conn_t *c = h_connect_index(d);
    unsigned long long f = lock_ok(c, "LOCK x");
    pid_t old = h_dlockd_pid(d);

    ck_assert_int_eq(chmod(bin, 0644), 0);
    int rc = upgrade_command(dlockd_bin(), d, h_dlockd_sock(d), out, sizeof(out));
    snprintf(want, sizeof(want), "hand-over failed, pid %d serves on; see its log", (int)old);
    ck_assert_msg(rc == 1 && strstr(out, want) != NULL,
                  "dlockd --upgrade to a file not executable: exit %d, said '%s', wanted 1 and "
                  "'%s'", rc, out, want);
    const char *info = h_info_line(d);
    ck_assert_msg(info_of(info, "pid") == old && info_of(info, "upgrade_failures") == 1 &&
                  info_of(info, "upgrades") == 0, "after a failed dlockd --upgrade: %s", info);

    ck_assert_int_eq(chmod(bin, 0755), 0);
    rc = upgrade_command(dlockd_bin(), d, h_dlockd_sock(d), out, sizeof(out));
    pid_t next = h_dlockd_track_upgrade(d);
    snprintf(want, sizeof(want), "dlockd: pid %d handed over to pid %d", (int)old, (int)next);
    ck_assert_msg(rc == 0 && strstr(out, want) != NULL,
                  "dlockd --upgrade: exit %d, said '%s', wanted 0 and '%s'", rc, out, want);
    holds(c, "x", 1, f);
    quiet(c, "the holder");

    char nowhere[600];
    snprintf(nowhere, sizeof(nowhere), "%s/nobody.sock", h_dir());
    rc = upgrade_command(dlockd_bin(), d, nowhere, out, sizeof(out));
    ck_assert_msg(rc == 1, "dlockd --upgrade with no daemon on the socket: exit %d, said '%s'", rc,
                  out);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* ---- attempts that fail -------------------------------------------------------------------- */

typedef struct held_s {
    h_conn_t *holder, *waiter, *adm;
    unsigned long long fence;
} held_t;

/* A holder of "f" and a waiter behind it on dlockd d. */
static held_t hold_and_wait(int d) {
    held_t h = {.holder = h_connect_index(d), .waiter = h_connect_index(d),
                .adm = h_connect_index(d)};
    h.fence = lock_ok(h.holder, "LOCK f");
    queue(h.adm, h.waiter, "LOCK f");
    return h;
}

/* After a failed attempt: the log says it failed, and why, the hold and
 * the wait are there, a new connection is served, and the waiter is
 * granted at the holder's release. Returns the waiter's fence (it holds
 * "f" now). */
static unsigned long long nothing_changed(int d, held_t *h, const char *why) {
    ck_assert_msg(h_log_count(d, "upgrade failed") >= 1, "the log (%s) lacks 'upgrade failed'",
                  h_dlockd_log(d));
    ck_assert_msg(h_log_count(d, why) >= 1, "the log (%s) lacks '%s'", h_dlockd_log(d), why);
    quiet(h->holder, "the holder");
    quiet(h->waiter, "the waiter");
    holds(h->holder, "f", 1, h->fence);
    h_await_waiters(h->adm, 1);
    h_conn_t *fresh = h_connect_index(d);
    h_expect_reply(fresh, "PING", "OK PONG");
    h_close(fresh);
    h_expect_reply(h->holder, "UNLOCK f", "OK 0");
    unsigned long long f = granted(h->waiter, "the waiter, after the holder's release");
    ck_assert_msg(f > h->fence, "the waiter's fence %llu, not above %llu", f, h->fence);
    return f;
}

/* Then a good binary at the path: the hand-over works, and INFO counts
 * both the failure and the hand-over. */
static void then_handover(int d, held_t *h, unsigned long long fence) {
    h_dlockd_upgrade(d);
    const char *info = h_info_line(d);
    ck_assert_msg(info_of(info, "upgrades") == 1 && info_of(info, "upgrade_failures") == 1,
                  "after a failed and a good hand-over: %s", info);
    quiet(h->waiter, "the waiter, holding");
    holds(h->waiter, "f", 1, fence);
    h_close(h->holder);
    h_close(h->waiter);
    h_close(h->adm);
}

START_TEST(new_binary_exits_at_once) {
    char bin[600];
    h_redis_start();
    copy_bin(bin, sizeof(bin));
    int d = h_dlockd_start_bin(bin, LEASE_CONF);
    KEEP(d);
    held_t h = hold_and_wait(d);
    replace_file(bin, "#!/bin/sh\nexit 3\n");
    h_dlockd_upgrade_fails(d);
    unsigned long long f = nothing_changed(d, &h, "exited with status 3");
    replace_file(bin, NULL);
    then_handover(d, &h, f);
    h_keep_passed();
}
END_TEST

START_TEST(new_binary_not_executable) {
    char bin[600];
    h_redis_start();
    copy_bin(bin, sizeof(bin));
    int d = h_dlockd_start_bin(bin, LEASE_CONF);
    KEEP(d);
    held_t h = hold_and_wait(d);
    ck_assert_int_eq(chmod(bin, 0644), 0);
    h_dlockd_upgrade_fails(d);
    unsigned long long f = nothing_changed(d, &h, "Permission denied");
    ck_assert_int_eq(chmod(bin, 0755), 0);
    then_handover(d, &h, f);
    h_keep_passed();
}
END_TEST

/* The old daemon stamps its state with a version no dlockd reads (the
 * test hook DLOCKD_TEST_STATE_VERSION): the new process refuses it, and
 * again on a second attempt, the counts going on. */
START_TEST(unknown_state_version) {
    h_redis_start();
    ck_assert_int_eq(setenv("DLOCKD_TEST_STATE_VERSION", "99", 1), 0);
    int d = h_dlockd_start(LEASE_CONF);
    ck_assert_int_eq(unsetenv("DLOCKD_TEST_STATE_VERSION"), 0);
    KEEP(d);
    held_t h = hold_and_wait(d);
    h_dlockd_upgrade_fails(d);
    unsigned long long f = nothing_changed(d, &h, "version 99");
    h_dlockd_upgrade_fails(d);
    const char *info = h_info_line(d);
    ck_assert_msg(info_of(info, "upgrades") == 0 && info_of(info, "upgrade_failures") == 2,
                  "after two failed hand-overs: %s", info);
    quiet(h.waiter, "the waiter, holding");
    holds(h.waiter, "f", 1, f);
    h_close(h.holder);
    h_close(h.waiter);
    h_close(h.adm);
    h_keep_passed();
}
END_TEST

/* ---- attackers: what a hand-over meets ----------------------------------------------------- */

/* A lease that outlives a stopped Redis (Redis keeps its clock); renewals
 * every second. */
#define PAUSE_CONF      "[lock]\nlease_ms = 10000\nrenew_every_ms = 1000\n"
#define GIVE_UP_MS      5000    /* HANDOVER_BACKEND_WAIT_MS, HANDOVER_DRAIN_MS: either gives up */
#define PAUSE_SLACK_MS  2500    /* a busy machine's delays on top */

/* A script at the daemon's path that sleeps SLOW_START_MS before it runs
 * the real binary: a new process slow to start, which the old one, serving
 * on, waits for. */
#define SLOW_START_MS   300
#define STARTING        "upgrade: SIGUSR2: starting" /* the old process's log, then */

static void slow_successor(const char *bin) {
    char real[PATH_MAX], text[PATH_MAX + 128];
    ck_assert_msg(realpath(dlockd_bin(), real) != NULL, "realpath %s: %s", dlockd_bin(),
                  strerror(errno));
    snprintf(text, sizeof(text), "#!/bin/sh\nsleep %d.%03d\nexec '%s' \"$@\"\n",
             SLOW_START_MS / 1000, SLOW_START_MS % 1000, real);
    replace_file(bin, text);
}

/* The frozen part of a hand-over, made long: the old process stops reading
 * its clients once the new one is ready, and drains until nothing is in
 * flight to Redis. Redis holds back writes for FREEZE_MS (CLIENT PAUSE ...
 * WRITE: the new process only reads to get ready) with a LOCK of flier's
 * in flight, and the old process drains that long. */
#define FREEZE_MS       1200
#define PROBE_MS        200     /* a PING unanswered that long: the clients are not read */

/* A dlockd whose requests to Redis may wait out the freeze (a release at a
 * stop too): command_timeout_ms above FREEZE_MS. */
static int start_freezable(void) {
    char text[1024];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n[redis]\nurl = unix://%s\ncommand_timeout_ms = %d\n"
             "connect_timeout_ms = 500\n" LEASE_CONF, h_redis_sock(), 2 * FREEZE_MS);
    int d = h_dlockd_start_conf(text);
    h_await_redis(d, 1);
    return d;
}

/* Starts a hand-over of d frozen that way; returns once a PING on probe
 * goes unanswered (it is answered after the hand-over, or its connection
 * closes with a stop). Then flier's LOCK is answered once, whatever. */
static void freeze_handover(int d, h_conn_t *flier, h_conn_t *probe) {
    const char *r = h_redis_cli("CLIENT PAUSE %d WRITE", FREEZE_MS);
    ck_assert_msg(strcmp(r, "OK") == 0, "CLIENT PAUSE: %s", r);
    long long paused = h_now_ms();
    h_send(flier, "LOCK frozen\n");
    ck_assert_int_eq(kill(h_dlockd_pid(d), SIGUSR2), 0);
    for (;;) {
        h_send(probe, "PING\n");
        const char *l = h_recv(probe, PROBE_MS);
        if (l == NULL) return;
        ck_assert_msg(strcmp(l, "OK PONG") == 0, "a PING while the hand-over starts: got '%s'", l);
        ck_assert_msg(h_now_ms() - paused < FREEZE_MS - PROBE_MS,
                      "the daemon still reads its clients %lld ms into a hand-over that must "
                      "drain %d ms", h_now_ms() - paused, FREEZE_MS);
    }
}

/* What h_dlockd_upgrade_with does between the signal and the outcome. */
typedef struct between_s {
    int d;
    int delay_us;               /* waits that long first */
    h_conn_t *close;            /* a client that closes its connection then, or NULL */
} between_t;

static void on_between(void *data) {
    between_t *b = data;
    if (b->delay_us > 0) usleep((useconds_t)b->delay_us);
    if (b->close != NULL) h_close(b->close);
}

/* The harness's children that run dlockd: an old process, or a new one
 * left to the harness (its child subreaper), maybe still the script of
 * slow_successor. Zombies are reaped, their exit in bad if it was not 0.
 * Returns how many still run, in pids. */
static int dlockd_children(pid_t *pids, int max, char *bad, size_t badlen) {
    DIR *dir = opendir("/proc");
    struct dirent *e;
    int n = 0;
    ck_assert_ptr_nonnull(dir);
    while ((e = readdir(dir)) != NULL) {
        char path[300], buf[512], comm[64], state;
        int pid = atoi(e->d_name), ppid;
        if (pid <= 0) continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (open == NULL || close == NULL || close - open - 1 >= (long)sizeof(comm)) continue;
        snprintf(comm, sizeof(comm), "%.*s", (int)(close - open - 1), open + 1);
        if (sscanf(close + 1, " %c %d", &state, &ppid) != 2 || ppid != (int)getpid() ||
            (strcmp(comm, "dlockd") != 0 && strcmp(comm, "sh") != 0))
            continue;
        if (state == 'Z') {
            int status = 0;
            waitpid(pid, &status, 0);
            if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && bad[0] == '\0')
                snprintf(bad, badlen, "dlockd pid %d ended with status %d", pid, status);
            continue;
        }
        if (n < max) pids[n++] = (pid_t)pid;
    }
    closedir(dir);
    return n;
}

/* Waits (H_WAIT_MS) until no dlockd child runs; one that still does is
 * killed and named in bad, as one that ended otherwise than with 0. */
static void await_no_dlockd(char *bad, size_t badlen) {
    pid_t pids[8];
    int n;
    long long end = h_now_ms() + H_WAIT_MS;
    bad[0] = '\0';
    while ((n = dlockd_children(pids, 8, bad, badlen)) > 0 && h_now_ms() < end) usleep(10000);
    for (int i = 0; i < n; i++) {
        if (bad[0] == '\0')
            snprintf(bad, badlen, "dlockd pid %d still runs %d ms after the SIGTERM", (int)pids[i],
                     H_WAIT_MS);
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
}

/* After a SIGTERM (old_status: the old pid's exit, as h_dlockd_stop gives
 * it): no dlockd process is left, each exited 0, the socket answers no
 * more, the n clients saw their connection close and Redis has none of
 * names (NULL-terminated) held. */
static void stopped_cleanly(int d, int old_status, h_conn_t **holders, int n,
                            const char *const names[]) {
    char bad[256];
    await_no_dlockd(bad, sizeof(bad));
    ck_assert_msg(bad[0] == '\0', "%s (see %s)", bad, h_dlockd_log(d));
    ck_assert_msg(old_status != -1 && WIFEXITED(old_status) && WEXITSTATUS(old_status) == 0,
                  "the old pid ended with status %d (see %s)", old_status, h_dlockd_log(d));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", h_dlockd_sock(d));
    int served = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0) close(fd);
    ck_assert_msg(!served, "something still accepts on %s after the SIGTERM", h_dlockd_sock(d));
    for (int i = 0; i < n; i++) {
        const char *l;
        while ((l = h_recv(holders[i], H_WAIT_MS)) != NULL) {} /* what a stop may say */
        ck_assert_msg(h_eof(holders[i], 0), "client %d: its connection still open %d ms after "
                      "the SIGTERM", i, H_WAIT_MS);
    }
    for (int i = 0; names[i] != NULL; i++) {
        char exists[64];
        snprintf(exists, sizeof(exists), "%s", h_redis_cli("EXISTS dlock:%s", names[i]));
        ck_assert_msg(strcmp(exists, "0") == 0, "dlock:%s is still in Redis after the SIGTERM "
                      "(EXISTS says '%s', PTTL '%s')", names[i], exists,
                      h_redis_cli("PTTL dlock:%s", names[i]));
    }
}

/* The wall-clock time (ms) of the last line of d's log with text, which
 * gives pid in *pid if it names one after "pid "; -1 if there is none. */
static long long log_line_ms(int d, const char *text, long *pid) {
    FILE *f = fopen(h_dlockd_log(d), "r");
    char line[1024];
    long long at = -1;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        struct tm tm = {0};
        int ms = 0;
        const char *p = strstr(line, text);
        if (p == NULL || sscanf(line, "%d-%d-%d %d:%d:%d.%d", &tm.tm_year, &tm.tm_mon,
                                &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
            continue;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        tm.tm_isdst = -1;
        at = (long long)mktime(&tm) * 1000 + ms;
        const char *q = strstr(p, "pid ");
        if (pid != NULL && q != NULL) *pid = atol(q + 4);
    }
    fclose(f);
    return at;
}

/* SIGTERM to d, as a service manager sends it to the main pid; waits for
 * that pid to end and returns its status. A hand-over done before (the
 * log says "upgrade: pid Q took over" earlier) made Q the main pid: Q gets
 * one too. One done after the SIGTERM was sent lost it: that fails. */
static int stops_after_handover; /* how many stop_main found a hand-over done before */

/* The same, the SIGTERM sent at sent by the caller (sig 0) or now. */
static int stop_main_sent(int d, long long sent, int sig) {
    int status = h_dlockd_stop(d, sig);
    long q = 0;
    long long done = log_line_ms(d, "upgrade: pid ", &q);
    if (done < 0 || h_log_count(d, " took over: ") == 0) return status;
    ck_assert_msg(done <= sent + 1, "the SIGTERM sent at %lld was lost: the old process handed "
                  "over to pid %ld at %lld (see %s)", sent, q, done, h_dlockd_log(d));
    ck_assert_int_eq(kill((pid_t)q, SIGTERM), 0);
    stops_after_handover++;
    return status;
}

static int stop_main(int d) {
    return stop_main_sent(d, h_wall_ms(), SIGTERM);
}

/* Waits (H_WAIT_MS) until INFO on adm says key=want. */
static void await_info(h_conn_t *adm, const char *key, long long want) {
    long long end = h_now_ms() + H_WAIT_MS, v;
    while ((v = h_info_value(adm, key)) != want) {
        ck_assert_msg(h_now_ms() < end, "INFO says %s=%lld, wanted %lld", key, v, want);
        usleep(10000);
    }
}

/* ---- a quorum ----------------------------------------------------------------------------- */

#define Q_NODES         3
#define Q_LEASE_MS      1000
/* A rejoin delay of a second and a half: the old process counts fresh
 * nodes 1.5 s after it first saw them; a new one that counts from their
 * uptime in whole seconds, less the second its rounding may hide
 * (quorum_vote_counts_at), only once it says 3, past 2 s, whatever the
 * seconds' edges. A hand-over in between meets nodes the old process
 * counts and the new one would not. */
#define Q_REJOIN_HALF_MS 1500
#define Q_RENEW_MS      500     /* the longest the old process waits for the new one */
#define Q_HOLDERS       4

/* HGETALL key on quorum node i, flattened (static). */
static const char *q_hgetall(int node, const char *key) {
    const char *const argv[] = {"HGETALL", key, NULL};
    const char *r = h_redis_unix_argv(node, argv);
    ck_assert_msg(r != NULL, "HGETALL %s: no answer from node index %d", key, node);
    return r;
}

static long long q_pttl(int node, const char *key) {
    const char *const argv[] = {"PTTL", key, NULL};
    const char *r = h_redis_unix_argv(node, argv);
    return r == NULL ? -3 : atoll(r);
}

/* Q_NODES fresh redis-servers, and a dlockd over them once it counts
 * them all (after rejoin_ms, its rejoin_delay_ms). */
static int quorum_start(int node[Q_NODES], int rejoin_ms, h_conn_t **adm) {
    char urls[512] = "", text[1024];
    size_t len = 0;
    for (int i = 0; i < Q_NODES; i++) {
        node[i] = h_redis_start_tcp(0, NULL);
        len += (size_t)snprintf(urls + len, sizeof(urls) - len, "%sredis://127.0.0.1:%d",
                                i ? " " : "", h_redis_port(node[i]));
    }
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n[redis]\nquorum = %s\ncommand_timeout_ms = 1000\n"
             "connect_timeout_ms = 500\nrejoin_delay_ms = %d\n[lock]\nlease_ms = %d\n"
             "renew_every_ms = %d\n", urls, rejoin_ms, Q_LEASE_MS, Q_RENEW_MS);
    int d = h_dlockd_start_conf(text);
    KEEP(d);
    *adm = h_connect_index(d);
    long long end = h_now_ms() + rejoin_ms + H_WAIT_MS;
    while (h_info_value(*adm, "redis_nodes_up") < Q_NODES) {
        ck_assert_msg(h_now_ms() < end, "dlockd: not every quorum node up: %s", h_info_line(d));
        usleep(20000);
    }
    return d;
}

/* On three independent Redis (Redlock): holders (one reentrant, one of
 * an MLOCK), two waiters in a row; three hand-overs, the first as soon as
 * the old process counts the nodes (as after a restart of most of them:
 * the new one must wait until it counts them too); every hold kept as it
 * was on every node, with its owner field, over more than a lease; then
 * the waiters granted in order. */
START_TEST(quorum_three_handovers) {
    int node[Q_NODES];
    char name[64], req[128];
    h_conn_t *adm;
    int d = quorum_start(node, Q_REJOIN_HALF_MS, &adm);

    h_conn_t *holder[Q_HOLDERS], *multi = h_connect_index(d), *waiter[2];
    unsigned long long fence[Q_HOLDERS], mf[2];
    fence_max = 0;
    for (int i = 0; i < Q_HOLDERS; i++) {
        holder[i] = h_connect_index(d);
        snprintf(req, sizeof(req), "LOCK q%d", i);
        fence[i] = lock_ok(holder[i], req);
        if (fence[i] > fence_max) fence_max = fence[i];
    }
    h_send(holder[0], "LOCK q0\n");
    snprintf(req, sizeof(req), "OK %llu 2", fence[0]);
    expect(holder[0], req, "holder 0's reentry");
    h_send(multi, "MLOCK 2 qa qb\n");
    const char *l = h_recv(multi, H_WAIT_MS);
    ck_assert_msg(l != NULL && sscanf(l, "OK %llu %llu", &mf[0], &mf[1]) == 2,
                  "MLOCK 2 qa qb: got '%s'", l ? l : "(nothing)");
    for (int i = 0; i < 2; i++) {
        if (mf[i] > fence_max) fence_max = mf[i];
        waiter[i] = h_connect_index(d);
        queue(adm, waiter[i], "LOCK q1");
    }
    /* Every node's owner fields, as they must stay. */
    char owners[Q_NODES][Q_HOLDERS + 2][512];
    const char *keys[Q_HOLDERS + 2];
    char keybuf[Q_HOLDERS + 2][32];
    for (int k = 0; k < Q_HOLDERS + 2; k++) {
        if (k < Q_HOLDERS) snprintf(keybuf[k], sizeof(keybuf[k]), "dlock:q%d", k);
        else snprintf(keybuf[k], sizeof(keybuf[k]), "dlock:q%c", k == Q_HOLDERS ? 'a' : 'b');
        keys[k] = keybuf[k];
        for (int i = 0; i < Q_NODES; i++)
            snprintf(owners[i][k], sizeof(owners[i][k]), "%s", q_hgetall(node[i], keys[k]));
    }
    ck_assert_msg(owners[0][0][0] != '\0', "dlock:q0 is on no node: the test reads the wrong key");

    long long first = h_now_ms(), last = 0;
    for (int k = 0; k < HANDOVERS; k++) {
        last = h_now_ms();
        h_dlockd_upgrade(d);
        ck_assert_int_eq(h_info_value(adm, "redis_nodes_up"), Q_NODES);
    }
    /* More than a lease since the first hand-over, a lease since the last:
     * the new processes' watchdog renews on every node. */
    long long left = first + Q_LEASE_MS + Q_LEASE_MS / 2 - h_now_ms();
    if (last + Q_LEASE_MS - h_now_ms() > left) left = last + Q_LEASE_MS - h_now_ms();
    if (left > 0) h_expect_silence(holder[0], (int)left, "holder 0 across a lease");
    for (int i = 0; i < Q_HOLDERS; i++) {
        snprintf(name, sizeof(name), "holder %d", i);
        quiet(holder[i], name);
        snprintf(name, sizeof(name), "q%d", i);
        holds(holder[i], name, i == 0 ? 2 : 1, fence[i]);
    }
    quiet(multi, "the MLOCK's holder");
    holds(multi, "qa", 1, mf[0]);
    holds(multi, "qb", 1, mf[1]);
    for (int i = 0; i < 2; i++) quiet(waiter[i], i ? "the second waiter" : "the first waiter");
    for (int k = 0; k < Q_HOLDERS + 2; k++) {
        for (int i = 0; i < Q_NODES; i++) {
            const char *now = q_hgetall(node[i], keys[k]);
            ck_assert_msg(strcmp(now, owners[i][k]) == 0,
                          "%s on node %d: '%s' after the hand-overs, '%s' before", keys[k], i, now,
                          owners[i][k]);
            long long ttl = q_pttl(node[i], keys[k]);
            ck_assert_msg(ttl > 0, "%s on node %d: PTTL %lld after the hand-overs", keys[k], i,
                          ttl);
        }
    }
    const char *info = h_info_line(d);
    ck_assert_msg(info_of(info, "upgrades") == HANDOVERS && info_of(info, "lost") == 0 &&
                  info_of(info, "waiters") == 2, "INFO after the hand-overs: %s", info);

    /* The waiters, in their order, above every earlier fence. */
    h_expect_reply(holder[1], "UNLOCK q1", "OK 0");
    unsigned long long f1 = granted_after(waiter[0], "the first waiter of q1");
    quiet(waiter[1], "the second waiter, behind the first");
    h_expect_reply(waiter[0], "UNLOCK q1", "OK 0");
    unsigned long long f2 = granted_after(waiter[1], "the second waiter of q1");
    ck_assert_msg(f2 > f1, "the second waiter's fence %llu, not above the first's %llu", f2, f1);
    holds(waiter[1], "q1", 1, f2);
    for (int i = 0; i < Q_HOLDERS; i++) h_close(holder[i]);
    for (int i = 0; i < 2; i++) h_close(waiter[i]);
    h_close(multi);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* ---- read/write locks and a count-down latch ------------------------------------------ */

/* "OK <fence> <holds>" of a read or write grant (a read's fence may be 0:
 * no writer yet). */
static unsigned long long rw_granted(h_conn_t *c, int holds, const char *what) {
    const char *l = h_recv(c, H_WAIT_MS);
    unsigned long long f = 0;
    int n = 0;
    char tail;
    ck_assert_msg(l != NULL, "%s: no reply", what);
    ck_assert_msg(sscanf(l, "OK %llu %d%c", &f, &n, &tail) == 2 && n == holds,
                  "%s: got '%s', wanted 'OK <fence> %d'", what, l, holds);
    return f;
}

/* STATUS of name on c begins with want. */
static void status_is(h_conn_t *c, const char *name, const char *want) {
    h_send(c, "STATUS %s\n", name);
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, want, strlen(want)) == 0,
                  "STATUS %s: got '%s', wanted '%s...'", name, l ? l : "(nothing)", want);
}

/* Two readers and a writer waiting behind them, with a reader behind the
 * writer; a writer and two readers waiting behind it; a latch of 2 with
 * an AWAIT and a tagged AWAIT. Two hand-overs, then the releases and the
 * count-downs: each waiter answered once, in its order. */
START_TEST(rwlock_and_latch) {
    h_redis_start();
    int d = h_dlockd_start(LEASE_CONF);
    KEEP(d);
    h_conn_t *adm = h_connect_index(d), *r[2], *w1 = h_connect_index(d), *r3 = h_connect_index(d);
    h_conn_t *w2 = h_connect_index(d), *rw[2], *a = h_connect_index(d), *ta = h_connect_index(d);
    for (int i = 0; i < 2; i++) {
        r[i] = h_connect_index(d);
        h_send(r[i], "RLOCK rw1\n");
        rw_granted(r[i], 1, "RLOCK rw1");
    }
    queue(adm, w1, "WLOCK rw1");
    queue(adm, r3, "RLOCK rw1"); /* behind the waiting writer */
    h_send(w2, "WLOCK rw2\n");
    unsigned long long wf2 = rw_granted(w2, 1, "WLOCK rw2");
    for (int i = 0; i < 2; i++) {
        rw[i] = h_connect_index(d);
        queue(adm, rw[i], "RLOCK rw2");
    }
    h_expect_reply(adm, "LATCHSET lt 2", "OK 1");
    queue(adm, a, "AWAIT lt");
    queue(adm, ta, "#t AWAIT lt");
    h_send(ta, "#p PING\n");
    expect(ta, "#p OK PONG", "a tagged PING beside the tagged AWAIT");

    for (int k = 0; k < 2; k++) h_dlockd_upgrade(d);

    quiet(w1, "the writer behind two readers");
    quiet(r3, "the reader behind the writer");
    for (int i = 0; i < 2; i++) quiet(rw[i], "a reader behind a writer");
    quiet(a, "the AWAIT");
    quiet(ta, "the tagged AWAIT");
    h_await_waiters(adm, 6);
    status_is(r[0], "rw1", "OK READ 2 1 ");
    status_is(w2, "rw2", "OK WRITE 1 1 ");
    h_expect_reply(adm, "LATCHCOUNT lt", "OK 2");

    /* rw1: the writer only after both readers, then the reader behind it. */
    h_expect_reply(r[0], "RUNLOCK rw1", "OK 0");
    status_is(r[1], "rw1", "OK READ 1 1 ");
    quiet(w1, "the writer, one reader left");
    h_expect_reply(r[1], "RUNLOCK rw1", "OK 0");
    unsigned long long wf1 = rw_granted(w1, 1, "WLOCK rw1 after both readers' release");
    quiet(r3, "the reader behind the writer, while it writes");
    status_is(adm, "rw1", "OK WRITE 1 0 ");
    h_expect_reply(w1, "WUNLOCK rw1", "OK 0");
    unsigned long long rf3 = rw_granted(r3, 1, "RLOCK rw1 after the writer's release");
    ck_assert_msg(rf3 == wf1, "the reader after the writer: fence %llu, wanted the writer's %llu",
                  rf3, wf1);
    quiet(w1, "the writer, answered once");

    /* rw2: both readers once the writer is done. */
    h_expect_reply(w2, "WUNLOCK rw2", "OK 0");
    for (int i = 0; i < 2; i++) {
        unsigned long long f = rw_granted(rw[i], 1, "RLOCK rw2 after the writer's release");
        ck_assert_msg(f == wf2, "a reader of rw2: fence %llu, wanted the writer's %llu", f, wf2);
    }
    status_is(adm, "rw2", "OK READ 2 0 ");

    /* The latch: nothing at 1, both AWAITs at 0, once. */
    h_expect_reply(adm, "COUNTDOWN lt", "OK 1");
    h_expect_silence(a, 300, "the AWAIT with the count at 1");
    quiet(ta, "the tagged AWAIT with the count at 1");
    h_expect_reply(adm, "COUNTDOWN lt", "OK 0");
    expect(a, "OK 0", "AWAIT lt at 0");
    expect(ta, "#t OK 0", "#t AWAIT lt at 0");
    h_await_waiters(adm, 0);
    for (int i = 0; i < 2; i++) {
        quiet(rw[i], "a reader of rw2, answered once");
        quiet(r[i], "a reader of rw1");
    }
    quiet(r3, "the reader of rw1, answered once");
    quiet(a, "the AWAIT, answered once");
    quiet(ta, "the tagged AWAIT, answered once");
    ck_assert_int_eq(h_info_value(adm, "lost"), 0);
    for (int i = 0; i < 2; i++) {
        h_close(r[i]);
        h_close(rw[i]);
    }
    h_close(w1);
    h_close(r3);
    h_close(w2);
    h_close(a);
    h_close(ta);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* ---- replies queued but not sent --------------------------------------------------------- */

/* Lines each flooding client sends, none read until after the hand-overs:
 * their replies (about 480 and 690 kB) are more than a Unix socket holds,
 * and below max_output (1 MiB). */
#define FLOOD_LINES     60000
#define FLOOD_MORE      2000    /* sent once a write is in flight: queued behind it */

/* Bytes the peer has not read of what we sent on c. */
static int unread_by_peer(h_conn_t *c) {
    int n = -1;
    ck_assert_int_eq(ioctl(c->fd, SIOCOUTQ, &n), 0);
    return n;
}

/* Bytes the kernel holds for us to read on c. */
static int in_socket(h_conn_t *c) {
    int n = -1;
    ck_assert_int_eq(ioctl(c->fd, FIONREAD, &n), 0);
    return n;
}

/* Bytes we have to read on c. */
static int to_read(h_conn_t *c) {
    return in_socket(c) + (int)c->len;
}

/* Reads replies from..to-1 of a flood of PINGs, every other one tagged
 * #f<i> if mixed; stops early once it read bytes (0: never), adding what
 * it read to *taken. Returns the next reply's number. */
static int read_flood(h_conn_t *c, int mixed, int from, int to, int bytes, int *taken) {
    char w[64];
    int read = 0, i;
    for (i = from; i < to && (bytes == 0 || read < bytes); i++) {
        if (mixed && i % 2 == 0) snprintf(w, sizeof(w), "#f%d OK PONG", i);
        else snprintf(w, sizeof(w), "OK PONG");
        const char *l = h_recv(c, H_WAIT_MS);
        ck_assert_msg(l != NULL && strcmp(l, w) == 0, "the %s flood's reply %d of %d: got '%s', "
                      "wanted '%s'", mixed ? "mixed" : "plain", i + 1, FLOOD_LINES,
                      l ? l : "(nothing)", w);
        read += (int)strlen(w) + 1;
    }
    *taken += read;
    return i;
}

/* Two clients send FLOOD_LINES PINGs each (one of them tagging every other
 * one) and read nothing; the daemon answers them all into its buffers.
 * Each reads as much as its socket held, so that the daemon writes on (a
 * Unix socket is writable again only once most of it was read) and its
 * write in flight is partly done; then FLOOD_MORE tagged PINGs more, whose
 * replies queue behind that write. Two hand-overs; then each reads the
 * rest of its replies, once each, in order. */
START_TEST(unsent_replies) {
    h_redis_start();
    int d = h_dlockd_start(LEASE_CONF);
    KEEP(d);
    h_conn_t *plain = h_connect_index(d), *mixed = h_connect_index(d);
    size_t cap = (size_t)FLOOD_LINES * 16, len = 0, want[2] = {0, 0};
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < FLOOD_LINES; i++) len += (size_t)snprintf(text + len, cap - len, "PING\n");
    h_send_raw(plain, text, len);
    want[0] = (size_t)FLOOD_LINES * strlen("OK PONG\n");
    len = 0;
    for (int i = 0; i < FLOOD_LINES; i++) {
        if (i % 2) {
            len += (size_t)snprintf(text + len, cap - len, "PING\n");
            want[1] += strlen("OK PONG\n");
        } else {
            len += (size_t)snprintf(text + len, cap - len, "#f%d PING\n", i);
            want[1] += (size_t)snprintf(NULL, 0, "#f%d OK PONG\n", i);
        }
    }
    h_send_raw(mixed, text, len);
    free(text);
    /* The daemon read it all (and so answered it all: a PING is answered
     * as it is read); more is queued than our sockets took. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (unread_by_peer(plain) > 0 || unread_by_peer(mixed) > 0) {
        ck_assert_msg(h_now_ms() < end, "the daemon did not read the PINGs: %d and %d bytes left",
                      unread_by_peer(plain), unread_by_peer(mixed));
        usleep(5000);
    }
    int got[2] = {to_read(plain), to_read(mixed)};
    ck_assert_msg((size_t)got[0] < want[0] && (size_t)got[1] < want[1],
                  "the sockets took every reply (%d of %zu and %d of %zu bytes): nothing is left "
                  "queued in the daemon to hand over", got[0], want[0], got[1], want[1]);

    h_conn_t *flood[2] = {plain, mixed};
    int next[2];
    for (int m = 0; m < 2; m++) {
        int full = in_socket(flood[m]), taken = 0;
        next[m] = read_flood(flood[m], m, 0, FLOOD_LINES, full, &taken);
        end = h_now_ms() + H_WAIT_MS;
        while (in_socket(flood[m]) < full / 2) { /* written on into the room */
            ck_assert_msg(h_now_ms() < end, "the daemon did not write on to the %s flood after "
                          "%d replies were read: %d bytes in the socket, %d before",
                          m ? "mixed" : "plain", next[m], in_socket(flood[m]), full);
            usleep(2000);
        }
        ck_assert_msg((size_t)(taken + to_read(flood[m])) < want[m], "the %s flood: %d bytes "
                      "read and %d to read of %zu: the daemon has none left to hand over",
                      m ? "mixed" : "plain", taken, to_read(flood[m]), want[m]);
    }

    for (int m = 0; m < 2; m++) {
        char more[32];
        for (int i = 0; i < FLOOD_MORE; i++) {
            int n = snprintf(more, sizeof(more), "#g%d PING\n", i);
            h_send_raw(flood[m], more, (size_t)n);
        }
    }
    end = h_now_ms() + H_WAIT_MS;
    while (unread_by_peer(plain) > 0 || unread_by_peer(mixed) > 0) {
        ck_assert_msg(h_now_ms() < end, "the daemon did not read the last PINGs");
        usleep(2000);
    }

    for (int k = 0; k < 2; k++) h_dlockd_upgrade(d);
    const char *info = h_info_line(d);
    printf("upgrade (%s): %d and %d of %zu and %zu bytes of replies in the sockets at first, "
           "%d and %d replies read before the hand-overs; the last state %lld bytes\n",
           tcase_name(), got[0], got[1], want[0], want[1], next[0], next[1],
           info_of(info, "upgrade_state_bytes"));

    /* Every reply once, in order, then the marker's. */
    h_send(plain, "#end PING\n");
    h_send(mixed, "#end PING\n");
    for (int m = 0; m < 2; m++) {
        char w[32];
        int taken = 0;
        read_flood(flood[m], m, next[m], FLOOD_LINES, 0, &taken);
        for (int i = 0; i < FLOOD_MORE; i++) {
            snprintf(w, sizeof(w), "#g%d OK PONG", i);
            expect(flood[m], w, m ? "the mixed flood's last replies" : "the plain flood's last "
                   "replies");
        }
        expect(flood[m], "#end OK PONG", "the marker, after the last reply");
    }
    quiet(plain, "the plain flood");
    quiet(mixed, "the mixed flood");
    ck_assert_int_eq(info_of(h_info_line(d), "output_overflows"), 0);
    h_close(plain);
    h_close(mixed);
    h_keep_passed();
}
END_TEST

/* ---- a client that closes during the hand-over ------------------------------------------ */

/* When a holder closes after the signal, in microseconds: at once, and
 * spread over the new process's start, the freeze and the state's sending
 * (a hand-over takes some 10-30 ms here), so that either process may be
 * the one that sees it. */
static const int close_after_us[] = {0, 1000, 3000, 6000, 10000, 20000};
#define CLOSE_ROUNDS    ((int)(sizeof(close_after_us) / sizeof(close_after_us[0])))

/* The LOCK sent into a freeze (freeze_handover) is granted, once. */
static void frozen_lock_answered(h_conn_t *flier) {
    granted(flier, "LOCK frozen, in flight while Redis held writes back");
    quiet(flier, "LOCK frozen, answered once");
}

/* A holder closes as the hand-over starts (CLOSE_ROUNDS times, each a
 * little later), then one that has a tagged wait of its own closes while
 * the hand-over is frozen: whichever process sees it frees what it held
 * and withdraws its wait; the waiters behind are granted. */
START_TEST(client_closes_during_handover) {
    char name[64], req[64];
    h_redis_start();
    int d = start_freezable();
    KEEP(d);
    h_conn_t *adm = h_connect_index(d);
    for (int k = 0; k < CLOSE_ROUNDS; k++) {
        h_conn_t *holder = h_connect_index(d), *waiter = h_connect_index(d);
        snprintf(req, sizeof(req), "LOCK ca%d", k);
        unsigned long long f = lock_ok(holder, req);
        queue(adm, waiter, req);
        between_t b = {.d = d, .delay_us = close_after_us[k], .close = holder};
        h_dlockd_upgrade_with(d, on_between, &b);
        snprintf(name, sizeof(name), "the waiter of a holder closed %d us after the signal",
                 close_after_us[k]);
        unsigned long long g = granted(waiter, name);
        ck_assert_msg(g > f, "%s: fence %llu, not above %llu", name, g, f);
        quiet(waiter, name);
        h_close(waiter);
    }

    h_conn_t *b = h_connect_index(d), *wb = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *wc = h_connect_index(d), *flier = h_connect_index(d), *probe = h_connect_index(d);
    unsigned long long fb = lock_ok(b, "LOCK cb"), fc = lock_ok(c, "LOCK cc");
    queue(adm, b, "#x LOCK cc");
    queue(adm, wb, "LOCK cb");
    queue(adm, wc, "LOCK cc"); /* behind the closing client's wait */
    freeze_handover(d, flier, probe);
    h_close(b);
    h_dlockd_track_upgrade(d);
    expect(probe, "OK PONG", "the PING sent into the freeze");
    frozen_lock_answered(flier);
    unsigned long long g = granted(wb, "the waiter of a holder closed while the hand-over was "
                                   "frozen");
    ck_assert_msg(g > fb, "cb's waiter: fence %llu, not above %llu", g, fb);
    h_await_waiters(adm, 1); /* wc only: the closed client's wait is gone */
    h_expect_reply(c, "UNLOCK cc", "OK 0");
    unsigned long long gc = granted(wc, "cc's waiter, behind the closed client's wait");
    ck_assert_msg(gc > fc, "cc's waiter: fence %llu, not above %llu", gc, fc);
    holds(wb, "cb", 1, g);
    holds(wc, "cc", 1, gc);
    await_info(adm, "connections", 6); /* adm, wb, c, wc, flier, probe: the others closed */
    ck_assert_int_eq(h_info_value(adm, "lost"), 0);
    h_close(wb);
    h_close(c);
    h_close(wc);
    h_close(flier);
    h_close(probe);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* ---- SIGTERM during a hand-over -------------------------------------------------------- */

/* Two holders and a waiter on dlockd d; their names end NULL. */
static const char *const term_names[] = {"t1", "t2", NULL};

static void term_holders(int d, h_conn_t **h, h_conn_t **waiter, h_conn_t **adm) {
    *adm = h_connect_index(d);
    for (int i = 0; i < 2; i++) {
        h[i] = h_connect_index(d);
        char req[32];
        snprintf(req, sizeof(req), "LOCK %s", term_names[i]);
        lock_ok(h[i], req);
    }
    *waiter = h_connect_index(d);
    queue(*adm, *waiter, "LOCK t1");
}

static void term_close(h_conn_t **h, h_conn_t *waiter, h_conn_t *adm) {
    for (int i = 0; i < 2; i++) h_close(h[i]);
    h_close(waiter);
    h_close(adm);
}

/* The end of a case that stopped a daemon frozen in a hand-over: it
 * stopped cleanly, its holders' locks released, and the connections go. */
static void frozen_case_end(int d, int status, h_conn_t **h, h_conn_t *adm, h_conn_t *flier,
                            h_conn_t *probe) {
    h_conn_t *all[5] = {h[0], h[1], h[2], flier, probe};
    const char *const names[] = {"t1", "t2", "frozen", NULL};
    stopped_cleanly(d, status, all, 5, names);
    term_close(h, h[2], adm);
    h_close(flier);
    h_close(probe);
    h_keep_passed();
}

/* SIGTERM right after SIGUSR2, and a little later (us), each to a
 * daemon of its own: the hand-over is at one of its steps, or done. */
static const int term_after_us[] = {0, 0, 1000, 3000, 6000, 10000, 20000};

/* SIGUSR2 and SIGTERM sent together or nearly: a process stops, releasing,
 * and none is left, whichever step the hand-over was at. */
START_TEST(sigterm_with_sigusr2) {
    h_conn_t *h[3], *adm;
    h_redis_start();
    for (size_t k = 0; k < sizeof(term_after_us) / sizeof(term_after_us[0]); k++) {
        int d = h_dlockd_start(LEASE_CONF);
        KEEP(d);
        term_holders(d, h, &h[2], &adm);
        ck_assert_int_eq(kill(h_dlockd_pid(d), SIGUSR2), 0);
        if (term_after_us[k] > 0) usleep((useconds_t)term_after_us[k]);
        int status = stop_main(d);
        stopped_cleanly(d, status, h, 3, term_names);
        term_close(h, h[2], adm);
    }
    printf("upgrade (%s): %d of %d stopped by the new process, the hand-over done first\n",
           tcase_name(), stops_after_handover,
           (int)(sizeof(term_after_us) / sizeof(term_after_us[0])));
    h_keep_passed();
}
END_TEST

/* SIGTERM while the new process starts (the old one serving on): the old
 * one stops, releasing, and the new one is gone too. */
START_TEST(sigterm_while_new_process_starts) {
    char bin[600];
    h_conn_t *h[3], *adm;
    h_redis_start();
    copy_bin(bin, sizeof(bin));
    int d = h_dlockd_start_bin(bin, LEASE_CONF);
    KEEP(d);
    term_holders(d, h, &h[2], &adm);
    slow_successor(bin);
    ck_assert_int_eq(kill(h_dlockd_pid(d), SIGUSR2), 0);
    h_await_log(d, STARTING, 1);
    int status = stop_main(d);
    stopped_cleanly(d, status, h, 3, term_names);
    term_close(h, h[2], adm);
    h_keep_passed();
}
END_TEST

/* The pid of the new process d's last hand-over started (its log). */
static pid_t successor_pid(int d) {
    long pid = 0;
    FILE *f = fopen(h_dlockd_log(d), "r");
    char line[1024];
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, STARTING);
        if (p != NULL && (p = strstr(p, "(pid ")) != NULL) pid = atol(p + 5);
    }
    fclose(f);
    ck_assert_msg(pid > 0, "the log (%s) names no new process", h_dlockd_log(d));
    return (pid_t)pid;
}

/* 1 if pid is blocked in poll(): the old process waiting for its new
 * one's READY (the loop waits in epoll, never in poll). */
static int in_poll(pid_t pid) {
    char path[64], buf[128];
    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    long nr = strtol(buf, NULL, 10);
    if (buf[0] < '0' || buf[0] > '9') return 0; /* "running" */
#ifdef SYS_poll
    if (nr == SYS_poll) return 1;
#endif
    return nr == SYS_ppoll;
}

/* SIGTERM while the old process has sent its state and waits for the new
 * one to say READY (stopped, until just after the SIGTERM): the SIGTERM
 * is not lost with the old process; it stops, releasing, instead of
 * handing over, and the new one is gone. */
START_TEST(sigterm_while_waiting_ready) {
    h_conn_t *h[3], *adm;
    h_redis_start();
    int d = start_freezable();
    KEEP(d);
    term_holders(d, h, &h[2], &adm);
    h_conn_t *flier = h_connect_index(d), *probe = h_connect_index(d);
    pid_t old = h_dlockd_pid(d);
    freeze_handover(d, flier, probe);
    pid_t next = successor_pid(d);
    ck_assert_int_eq(kill(next, SIGSTOP), 0);
    /* The LOCK in flight ends with the freeze: then the old process sends
     * its state and waits, at most renew_every_ms (1000). */
    frozen_lock_answered(flier);
    long long end = h_now_ms() + H_WAIT_MS;
    while (!in_poll(old)) {
        ck_assert_msg(h_now_ms() < end, "pid %d never waited for its new one's READY",
                      (int)old);
        usleep(1000);
    }
    long long sent = h_wall_ms();
    ck_assert_int_eq(kill(old, SIGTERM), 0);
    ck_assert_int_eq(kill(next, SIGCONT), 0);
    int status = stop_main_sent(d, sent, 0);
    ck_assert_msg(h_log_count(d, "upgrade failed") == 1, "the hand-over did not give way to the "
                  "SIGTERM (see %s)", h_dlockd_log(d));
    frozen_case_end(d, status, h, adm, flier, probe);
}
END_TEST

/* SIGTERM while the hand-over is frozen, draining (a LOCK in flight while
 * Redis holds writes back): the daemon stops once Redis takes writes
 * again, releasing, and its new process is gone. */
START_TEST(sigterm_while_draining) {
    h_conn_t *h[3], *adm;
    h_redis_start();
    int d = start_freezable();
    KEEP(d);
    term_holders(d, h, &h[2], &adm);
    h_conn_t *flier = h_connect_index(d), *probe = h_connect_index(d);
    freeze_handover(d, flier, probe);
    int status = stop_main(d);
    const char *l = h_recv(flier, H_WAIT_MS);
    printf("upgrade (%s): the LOCK in flight got '%s'\n", tcase_name(), l ? l : "(nothing)");
    frozen_case_end(d, status, h, adm, flier, probe);
}
END_TEST

/* ---- Redis paused with a request in flight -------------------------------------------- */

/* Redis stopped with a LOCK in flight, then SIGUSR2: the attempt fails
 * (the new process cannot reach Redis, or the drain gives up) within a
 * bound; once Redis goes on, the old process serves as before, the
 * request is answered once, and a hand-over then works. */
START_TEST(redis_paused_in_flight) {
    h_redis_start();
    int d = h_dlockd_start(PAUSE_CONF);
    KEEP(d);
    h_conn_t *adm = h_connect_index(d), *holder = h_connect_index(d);
    h_conn_t *waiter = h_connect_index(d), *flier = h_connect_index(d);
    unsigned long long f = lock_ok(holder, "LOCK p1");
    queue(adm, waiter, "LOCK p1");
    h_redis_signal(SIGSTOP);
    queue(adm, flier, "LOCK p2"); /* its first try in flight */
    long long t0 = h_now_ms();
    h_dlockd_upgrade_fails(d);
    long long took = h_now_ms() - t0;
    h_redis_signal(SIGCONT);
    h_await_redis(d, 1); /* its connections timed out: they connect again */
    char why[1024] = "";
    FILE *log = fopen(h_dlockd_log(d), "r");
    ck_assert_ptr_nonnull(log);
    char line[1024];
    while (fgets(line, sizeof(line), log) != NULL)
        if (strstr(line, "upgrade failed") != NULL) snprintf(why, sizeof(why), "%s", line);
    fclose(log);
    printf("upgrade (%s): failed after %lld ms: %s", tcase_name(), took, why);
    ck_assert_msg(why[0] != '\0', "the log lacks 'upgrade failed'");
    ck_assert_msg(took < GIVE_UP_MS + PAUSE_SLACK_MS,
                  "the attempt took %lld ms to fail", took);

    /* The request in flight: answered once, whatever it was. */
    const char *l = h_recv(flier, H_WAIT_MS);
    ck_assert_msg(l != NULL, "LOCK p2, in flight when Redis stopped: no reply");
    unsigned long long pf = 0;
    int granted_p2 = sscanf(l, "OK %llu 1", &pf) == 1;
    ck_assert_msg(granted_p2 || strncmp(l, "ERR BACKEND", 11) == 0,
                  "LOCK p2, in flight when Redis stopped: got '%s'", l);
    printf("upgrade (%s): LOCK p2, in flight, got '%s'\n", tcase_name(), l);
    quiet(flier, "LOCK p2, answered once");
    quiet(holder, "the holder");
    quiet(waiter, "the waiter");
    holds(holder, "p1", 1, f);
    if (granted_p2) holds(flier, "p2", 1, pf);
    h_await_waiters(adm, 1);
    ck_assert_int_eq(h_info_value(adm, "lost"), 0);

    h_dlockd_upgrade(d);
    holds(holder, "p1", 1, f);
    h_expect_reply(holder, "UNLOCK p1", "OK 0");
    unsigned long long g = granted(waiter, "the waiter, after the holder's release");
    ck_assert_msg(g > f, "the waiter's fence %llu, not above %llu", g, f);
    h_close(adm);
    h_close(holder);
    h_close(waiter);
    h_close(flier);
    h_keep_passed();
}
END_TEST

/* ---- a short lease across many hand-overs ------------------------------------------------- */

#define SHORT_LEASE_MS  1500
/* Between two hand-overs: they fall at every point of the renewal period
 * (500 ms) without spawning hundreds of processes on a shared machine. */
#define SHORT_PACE_US   40000

/* A hold leased 1500 ms (renewed every 500) while the daemon hands over
 * again and again for three leases: never lost, its key never expiring,
 * and the last new process renewing it. */
START_TEST(short_lease_across_handovers) {
    char conf[64];
    h_redis_start();
    snprintf(conf, sizeof(conf), "[lock]\nlease_ms = %d\n", SHORT_LEASE_MS);
    int d = h_dlockd_start(conf);
    KEEP(d);
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    unsigned long long f = lock_ok(c, "LOCK k");
    int ok = 0, failed = 0;
    long long lowest = SHORT_LEASE_MS, t0 = h_now_ms();
    while (h_now_ms() - t0 < 3 * SHORT_LEASE_MS) {
        if (h_dlockd_upgrade_try(d) > 0) ok++;
        else failed++;
        long long ttl = atoll(h_redis_cli("PTTL dlock:k"));
        ck_assert_msg(ttl > 0, "after %d hand-overs (%d failed), %lld ms in: PTTL dlock:k %lld",
                      ok, failed, h_now_ms() - t0, ttl);
        if (ttl < lowest) lowest = ttl;
        quiet(c, "the holder");
        usleep(SHORT_PACE_US);
    }
    printf("upgrade (%s): %d hand-overs, %d failed, in %d ms; the lowest PTTL seen %lld ms\n",
           tcase_name(), ok, failed, 3 * SHORT_LEASE_MS, lowest);
    ck_assert_msg(ok >= 3, "%d hand-overs in %d ms (%d failed)", ok, 3 * SHORT_LEASE_MS, failed);
    /* The last new process renews it. */
    long long renewals = h_info_value(adm, "renewals");
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(adm, "renewals") <= renewals) {
        ck_assert_msg(h_now_ms() < end, "no renewal since the last hand-over: %s",
                      h_info_line(d));
        usleep(20000);
    }
    quiet(c, "the holder");
    holds(c, "k", 1, f);
    ck_assert_msg(atoll(h_redis_cli("PTTL dlock:k")) > 0, "PTTL dlock:k: %s",
                  h_redis_cli("PTTL dlock:k"));
    ck_assert_int_eq(h_info_value(adm, "lost"), 0);
    h_close(c);
    h_close(adm);
    h_keep_passed();
}
END_TEST

static void tcase(Suite *s, const char *name, const TTest *test) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

static Suite *suite(void) {
    Suite *s = suite_create("upgrade");
    tcase(s, "standalone", standalone_under_load);
    tcase(s, "cluster", cluster_under_load);
    tcase(s, "command", upgrade_command_says_what_happened);
    tcase(s, "exits_at_once", new_binary_exits_at_once);
    tcase(s, "not_executable", new_binary_not_executable);
    tcase(s, "state_version", unknown_state_version);
    tcase(s, "quorum", quorum_three_handovers);
    tcase(s, "rwlock_latch", rwlock_and_latch);
    tcase(s, "unsent_replies", unsent_replies);
    tcase(s, "client_closes", client_closes_during_handover);
    tcase(s, "sigterm_with_sigusr2", sigterm_with_sigusr2);
    tcase(s, "sigterm_while_starting", sigterm_while_new_process_starts);
    tcase(s, "sigterm_while_draining", sigterm_while_draining);
    tcase(s, "sigterm_while_waiting_ready", sigterm_while_waiting_ready);
    tcase(s, "redis_paused", redis_paused_in_flight);
    tcase(s, "short_lease", short_lease_across_handovers);
    return s;
}

int main(void) {
    return h_main(suite());
}
