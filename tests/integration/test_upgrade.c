/* Integration tests of hand-overs (issue 39): SIGUSR2 under load with every kind of hold and wait, on standalone and on a Cluster; dlockd --upgrade; the attempts that fail.
 * SPDX-License-Identifier: MIT
 *
 * A hand-over must cost the clients nothing: no connection closed, no
 * !LOST, every hold with its fence, count and lease, every wait with its
 * place and its time left, tagged requests and half-sent lines, observers,
 * counters. The scenario builds all of that, hands over three times in a
 * row while eight connections loop LOCK/UNLOCK, then releases the holders
 * one by one and checks who is granted next. A new binary that cannot take
 * over (exits at once, not executable, a state version it does not know)
 * changes nothing. Orders are checked by what comes next on a connection
 * after a step that can cause only one answer, never by waiting a while;
 * the only waits are the ones the test is about (a lease, a TRY's wait). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
    return s;
}

int main(void) {
    return h_main(suite());
}
