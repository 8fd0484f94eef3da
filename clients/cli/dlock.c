/* dlock: run a command while holding a dlockd lock, in the manner of flock(1).
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clients/c/dlock.h"

/* Exit codes (sysexits.h where one fits). */
#define EXIT_USAGE       64
#define EXIT_DATAERR     65
#define EXIT_UNAVAILABLE 69
#define EXIT_SOFTWARE    70
#define EXIT_OSERR       71
#define EXIT_TEMPFAIL    75
#define EXIT_NOPERM      77
#define EXIT_LOST        79
#define EXIT_NOEXEC      126
#define EXIT_NOTFOUND    127

#define DEFAULT_GRACE_MS 5000
#define SECONDS_MAX      2147483.0  /* fits in a uint32 of milliseconds */

static int sigpipe[2] = {-1, -1};  /* signal handler -> main loop */

static void usage(FILE *out) {
    fprintf(out,
        "usage: dlock [-S SOCKET] [-s | -x | --fair | --permits N] [--seminit N]\n"
        "             [-n | -w SECONDS] [-E CODE] [-l LEASE_MS] [-k SECONDS] [-v]\n"
        "             NAME COMMAND [ARG...]\n"
        "       dlock [-S SOCKET] [-n | -w SECONDS] [-E CODE] [-l LEASE_MS] [-k SECONDS] [-v]\n"
        "             -m NAME [-m NAME...] [--] COMMAND [ARG...]\n"
        "       dlock [-S SOCKET] [-v] --seminit N NAME\n"
        "       dlock [-S SOCKET] --status NAME | --force-unlock NAME | --info | --ping\n"
        "       dlock [-S SOCKET] --who NAME | --metrics\n"
        "       dlock [-S SOCKET] --list [--json] [--limit N] [PATTERN]\n"
        "       dlock [-S SOCKET] [-l LEASE_MS] [-k SECONDS] [-v] --elect NAME\n"
        "             [--value VALUE] [--] COMMAND [ARG...]\n"
        "       dlock [-S SOCKET] --observe NAME | --leader NAME\n"
        "       dlock [-S SOCKET] [-v] --latch-set N NAME | --countdown NAME\n"
        "       dlock [-S SOCKET] [-n | -w SECONDS] [-E CODE] [-v] --await NAME\n"
        "  -S SOCKET   dlockd's socket (default $DLOCK_SOCKET, else %s)\n"
        "  -s          take a read lock (shared with other readers; --shared)\n"
        "  -x          take a write lock (excludes readers and writers; --exclusive)\n"
        "  --fair      take a fair lock (waiters served first come, first served)\n"
        "  --permits N hold N permits of the semaphore NAME (1-%d)\n"
        "              without -s, -x, --fair or --permits, a plain lock: every user\n"
        "              of NAME must take the same kind (plain, -s and -x, --fair, or\n"
        "              --permits)\n"
        "  --seminit N first give the semaphore NAME N permits, unless it has its\n"
        "              permits already; without COMMAND, only that\n"
        "  -m NAME     take NAME and the other -m names together, all or none (up to\n"
        "              %d; --multi); COMMAND gets DLOCK_NAMES and DLOCK_FENCES (the\n"
        "              names and their fences, space-separated, in the order given)\n"
        "  -n          fail at once if the lock is held (or the permits are not free)\n"
        "  -w SECONDS  give up after SECONDS (fractions allowed)\n"
        "  -E CODE     exit code when -n or -w could not get the lock (default 1)\n"
        "  -l LEASE_MS hold the lock with a lease instead of while running\n"
        "  -k SECONDS  after the lock is lost, SIGKILL COMMAND this long after SIGTERM\n"
        "              (default 5)\n"
        "  -v          say on stderr what was set and acquired (--verbose)\n"
        "  --elect NAME  campaign to lead NAME; run COMMAND while leading, resign when\n"
        "              it exits; on loss of the leadership stop it and exit 75\n"
        "  --value VALUE what observers are told of this leader (default: the host name)\n"
        "  --observe NAME  print NAME's leader, then every change, one line each\n"
        "              (FENCE VALUE, or NONE), until killed\n"
        "  --leader NAME   print NAME's leader now (FENCE VALUE); NONE and exit 1 if none\n"
        "  --latch-set N NAME  give the count-down latch NAME the count N (1-2147483647),\n"
        "              unless it is set already\n"
        "  --countdown NAME  count the latch NAME down by one; print the count left\n"
        "  --await NAME  wait until the latch NAME's count is 0 (no latch counts as 0);\n"
        "              with -n or -w, exit with -E's code if it is not 0 by then\n"
        "  --list      list the locks matching PATTERN (a glob, default *): name,\n"
        "              kind, holder, age (this dlockd's holders) or ttl, fence, waiters\n"
        "  --json      ... as JSON;  --limit N  at most N (1-%d, default 100)\n"
        "COMMAND gets DLOCK_NAME and DLOCK_FENCE (a lock, a leadership) or DLOCK_PERMITS\n"
        "(a semaphore), and DLOCK_LEADER_VALUE (a leadership), in its environment.\n"
        "-s used to name the socket: use -S (--socket).\n"
        "See dlock(1).\n",
        DLOCK_DEFAULT_SOCKET, DLOCK_PERMITS_MAX, DLOCK_MNAMES_MAX, DLOCK_LIST_MAX);
}

/* Prints "dlock: <before>'<arg>'<after>" (arg quoted only when given). */
static int usage_error(const char *before, const char *arg, const char *after) {
    if (arg != NULL) fprintf(stderr, "dlock: %s'%s'%s\n", before, arg, after);
    else fprintf(stderr, "dlock: %s\n", before);
    usage(stderr);
    return EXIT_USAGE;
}

/* Strict non-negative decimal with an optional fraction: "2", "0.25". */
static int parse_seconds(const char *s, uint32_t *ms) {
    double v = 0, scale = 1;
    int digits = 0, dot = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '.' && !dot) {
            dot = 1;
            continue;
        }
        if (*p < '0' || *p > '9') return -1;
        digits++;
        if (dot) {
            scale /= 10;
            v += (*p - '0') * scale;
        } else {
            v = v * 10 + (*p - '0');
        }
        if (v > SECONDS_MAX) return -1;
    }
    if (digits == 0) return -1;
    *ms = (uint32_t)(v * 1000 + 0.5);
    return 0;
}

static int parse_uint(const char *s, uint32_t max, uint32_t *out) {
    uint64_t v = 0;
    if (*s == '\0') return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > max) return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Exit code for a failed acquisition or query. */
static int exit_for(int err) {
    switch (err) {
    case DLOCK_EBACKEND:
    case DLOCK_ELIMIT: return EXIT_TEMPFAIL;
    case DLOCK_EDENIED: return EXIT_NOPERM;
    case DLOCK_ECONNECT:
    case DLOCK_ECLOSED:
    case DLOCK_EIO: return EXIT_UNAVAILABLE;
    case DLOCK_ENAME:
    case DLOCK_EARGS: return EXIT_USAGE;
    case DLOCK_EKIND: return EXIT_DATAERR;
    default: return EXIT_SOFTWARE;
    }
}

/* What dlock holds while COMMAND runs. */
typedef struct grant_s {
    uint64_t fence;       /* a lock's */
    uint32_t permits;     /* a semaphore's: how many to take */
    uint32_t held;        /* a semaphore's: how many this connection holds */
} grant_t;

/* The kinds of lock dlock can hold, chosen once from -s, -x, --fair and
 * --permits. wait_ms < 0: wait as long as it takes. */
typedef struct lock_kind_s {
    int (*take)(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                grant_t *g);
    const char *on_kind;  /* after "dlock: NAME: " when dlockd answers ERR KIND */
} lock_kind_t;

static int take_plain(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                      grant_t *g) {
    if (wait_ms < 0) return dlock_lock(d, name, lease_ms, &g->fence, NULL);
    return dlock_trylock(d, name, (uint32_t)wait_ms, lease_ms, &g->fence, NULL, NULL);
}

static int take_read(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                     grant_t *g) {
    if (wait_ms < 0) return dlock_rlock(d, name, lease_ms, &g->fence, NULL);
    return dlock_tryrlock(d, name, (uint32_t)wait_ms, lease_ms, &g->fence, NULL, NULL);
}

static int take_write(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                      grant_t *g) {
    if (wait_ms < 0) return dlock_wlock(d, name, lease_ms, &g->fence, NULL);
    return dlock_trywlock(d, name, (uint32_t)wait_ms, lease_ms, &g->fence, NULL, NULL);
}

static int take_fair(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                     grant_t *g) {
    if (wait_ms < 0) return dlock_fairlock(d, name, lease_ms, &g->fence, NULL);
    return dlock_tryfairlock(d, name, (uint32_t)wait_ms, lease_ms, &g->fence, NULL, NULL);
}

static int take_permits(dlock_t *d, const char *name, long long wait_ms, uint32_t lease_ms,
                        grant_t *g) {
    if (wait_ms < 0) return dlock_acquire(d, name, g->permits, lease_ms, &g->held);
    return dlock_tryacquire(d, name, g->permits, (uint32_t)wait_ms, lease_ms, &g->held);
}

static const char held_as_plain[] =
    "held as a plain lock, a semaphore or a fair lock (take it as its other users do: "
    "without -s and -x, or with --permits or --fair), or this dlockd has no read/write "
    "locks (quorum)";

/* SEMINIT's and ACQUIRE's ERR KIND. */
static const char not_a_semaphore[] =
    "held as a lock, not a semaphore (take it as its other users do: without "
    "--permits), or this dlockd has no semaphores (quorum)";

static const lock_kind_t plain_kind = {
    take_plain,
    "held as a read/write lock, a semaphore or a fair lock: take it with -s or -x, "
    "--permits or --fair, as its other users do"};
static const lock_kind_t read_kind = {take_read, held_as_plain};
static const lock_kind_t write_kind = {take_write, held_as_plain};
static const lock_kind_t fair_kind = {
    take_fair,
    "held as a plain lock, a read/write lock or a semaphore, not a fair lock (take it "
    "as its other users do: without --fair), or this dlockd has no fair locks (quorum)"};
static const lock_kind_t sem_kind = {take_permits, not_a_semaphore};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t n = write(sigpipe[1], &c, 1);
    (void)n;
    errno = saved;
}

typedef struct run_s {
    const char *name;
    const char *const *names;  /* -m: every name held (n of them), else NULL */
    size_t n;
    const char *what;  /* "lock" or "leadership of" */
    int lost_code;     /* dlock's exit code once lost */
    int lost;          /* the lock can no longer be counted on */
} run_t;

static void on_lost(dlock_t *d, const char *name, const char *reason, void *data) {
    run_t *run = data;
    int ours = strcmp(name, run->name) == 0;
    (void)d;
    for (size_t i = 0; i < run->n && !ours; i++) ours = strcmp(name, run->names[i]) == 0;
    if (!ours) return;
    fprintf(stderr, "dlock: %s %s lost (%s): stopping the command\n", run->what, name, reason);
    run->lost = 1;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects, or says why not (naming the socket) on stderr. */
static dlock_t *connect_or_say(const char *sock) {
    int err = 0;
    dlock_t *d = dlock_connect(sock, &err);
    if (d == NULL) fprintf(stderr, "dlock: %s\n", dlock_strerror(err));
    return d;
}

/* One request for the query forms: prints the reply; exits 0 on OK, 77 on
 * ERR DENIED, 1 on any other reply. */
static int query(const char *sock, const char *line) {
    char reply[DLOCK_LINE_MAX + 1];
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    reply[0] = '\0';
    int r = dlock_request(d, line, reply, sizeof(reply));
    dlock_close(d);
    if (reply[0] == '\0') {
        fprintf(stderr, "dlock: %s\n", dlock_strerror(r));
        return EXIT_UNAVAILABLE;
    }
    printf("%s\n", reply);
    if (r == DLOCK_EDENIED) return EXIT_NOPERM;
    return r == 0 ? 0 : 1;
}

/* Connects to a metrics endpoint as INFO gives it: a socket path, or
 * host:port ([ipv6]:port). -1 with errno (or EHOSTUNREACH) on failure. */
static int metrics_connect(const char *where) {
    if (where[0] == '/') {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(where) >= sizeof(sa.sun_path)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(sa.sun_path, where, strlen(where) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        return fd;
    }
    char host[256];
    const char *colon = strrchr(where, ':');
    size_t hlen = colon ? (size_t)(colon - where) : 0;
    if (colon == NULL || hlen == 0 || hlen >= sizeof(host)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(host, where, hlen);
    host[hlen] = '\0';
    if (host[0] == '[' && host[hlen - 1] == ']') {
        host[hlen - 1] = '\0';
        memmove(host, host + 1, hlen - 1);
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
        errno = EHOSTUNREACH;
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            int e = errno;
            close(fd);
            fd = -1;
            errno = e;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* --metrics: finds the endpoint in INFO (metrics=), GETs /metrics and
 * prints the body. 0, 1 when metrics are off or the answer is not 200,
 * 69 when dlockd or the endpoint cannot be reached. */
static int show_metrics(const char *sock) {
    char reply[DLOCK_LINE_MAX + 1], where[512];
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    int r = dlock_request(d, "INFO", reply, sizeof(reply));
    dlock_close(d);
    if (r != 0) {
        fprintf(stderr, "dlock: INFO: %s\n", reply[0] ? reply : dlock_strerror(r));
        return EXIT_UNAVAILABLE;
    }
    const char *m = strstr(reply, " metrics=");
    if (m == NULL || sscanf(m + 9, "%511s", where) != 1 || strcmp(where, "-") == 0) {
        fprintf(stderr, "dlock: dlockd serves no metrics (set metrics in [server] of "
                        "dlockd.conf)\n");
        return 1;
    }
    int fd = metrics_connect(where);
    if (fd < 0) {
        fprintf(stderr, "dlock: cannot connect to the metrics endpoint %s: %s\n", where,
                strerror(errno));
        return EXIT_UNAVAILABLE;
    }
    static const char get[] = "GET /metrics HTTP/1.0\r\nHost: dlockd\r\n\r\n";
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t n = buf ? write(fd, get, sizeof(get) - 1) : -1;
    while (n >= 0 && buf != NULL) {
        if (len + 1 == cap) {
            char *more = realloc(buf, cap * 2);
            if (more == NULL) break;
            buf = more;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    if (buf == NULL) {
        fprintf(stderr, "dlock: out of memory\n");
        return EXIT_SOFTWARE;
    }
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 || body == NULL) {
        fprintf(stderr, "dlock: %s answered: %.*s\n", where, (int)strcspn(buf, "\r\n"), buf);
        free(buf);
        return 1;
    }
    fputs(body + 4, stdout);
    free(buf);
    return 0;
}

/* Runs argv as a child while the lock is held; returns dlock's exit code. */
static int run_child(dlock_t *d, run_t *run, char **argv, uint32_t grace_ms) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigset_t block, old;
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

    if (pipe2(sigpipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("dlock: pipe");
        return EXIT_OSERR;
    }
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaddset(&block, sigs[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &sa, NULL);

    pid_t child = fork();
    if (child < 0) {
        perror("dlock: fork");
        return EXIT_OSERR;
    }
    if (child == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &dfl, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[0], argv);
        int e = errno;
        fprintf(stderr, "dlock: %s: %s\n", argv[0], strerror(e));
        _exit(e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);

    int status = 0, exited = 0;
    long long kill_at = -1;
    while (!exited) {
        struct pollfd pfd[2] = {
            {.fd = sigpipe[0], .events = POLLIN},
            {.fd = run->lost ? -1 : dlock_fd(d), .events = POLLIN},
        };
        int timeout = -1;
        if (kill_at >= 0) {
            long long left = kill_at - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
        int r = poll(pfd, 2, timeout);
        if (r < 0 && errno != EINTR) break;
        if (r > 0 && (pfd[0].revents & POLLIN)) {
            unsigned char sig;
            while (read(sigpipe[0], &sig, 1) == 1) {
                if (sig != SIGCHLD) kill(child, sig);
            }
        }
        if (r > 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (dlock_poll(d, 0) < 0 && !run->lost) {
                fprintf(stderr, "dlock: connection to dlockd lost: stopping the command\n");
                run->lost = 1;
            }
        }
        if (run->lost && kill_at < 0) {
            kill(child, SIGTERM);
            kill_at = now_ms() + grace_ms;
        }
        if (kill_at >= 0 && now_ms() >= kill_at) {
            kill(child, SIGKILL);
            kill_at = now_ms() + 3600 * 1000; /* once */
        }
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child) exited = 1;
    }
    if (run->lost) return run->lost_code;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return EXIT_SOFTWARE;
}

/* A leader as --observe and --leader print it. 0, or -1 when stdout is
 * gone (EPIPE: the reader of a pipeline left). */
static int print_leader(uint64_t fence, const char *value) {
    if (value != NULL) printf("%llu %s\n", (unsigned long long)fence, value);
    else printf("NONE\n");
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -1;
}

static void on_leader(dlock_t *d, const char *name, uint64_t fence, const char *value,
                      void *data) {
    int *gone = data;
    (void)d;
    (void)name;
    if (!*gone && print_leader(fence, value) != 0) *gone = 1;
}

/* ELECT's ERR KIND. */
static const char not_an_election[] =
    "held as a lock or a semaphore, not an election (choose another name), or this "
    "dlockd has no elections (quorum)";

/* --observe NAME: the leader now, then every change, until killed or the
 * reader of stdout goes (0), or dlockd goes (69). --leader NAME (once):
 * 0 when someone leads, 1 when nobody does. */
static int observe(const char *sock, const char *name, int once) {
    char value[DLOCK_VALUE_MAX + 1];
    uint64_t fence = 0;
    int gone = 0;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    int r = once ? dlock_leader(d, name, &fence, value, sizeof(value))
                 : dlock_observe(d, name, on_leader, &gone, &fence, value, sizeof(value));
    if (r < 0) {
        fprintf(stderr, "dlock: %s: %s\n", name,
                r == DLOCK_EKIND ? not_an_election : dlock_strerror(r));
        dlock_close(d);
        return exit_for(r);
    }
    if (print_leader(fence, r == 1 ? value : NULL) != 0 || once) {
        dlock_close(d);
        return once && r == 0 ? 1 : 0;
    }
    while (!gone) {
        r = dlock_poll(d, -1);
        if (r < 0 && !gone) {
            fprintf(stderr, "dlock: %s: %s\n", name, dlock_strerror(r));
            dlock_close(d);
            return EXIT_UNAVAILABLE;
        }
    }
    dlock_close(d);
    return 0;
}

/* --elect NAME: campaigns, runs argv while leading, resigns when it exits. */
static int elect(const char *sock, run_t *run, const char *value, uint32_t lease_ms,
                 char **argv, uint32_t grace_ms, int verbose) {
    char host[DLOCK_VALUE_MAX + 1], num[24];
    uint64_t fence = 0;
    if (value == NULL) {
        if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0') {
            fprintf(stderr, "dlock: --elect: no host name for a value: give --value\n");
            return EXIT_USAGE;
        }
        host[sizeof(host) - 1] = '\0';
        value = host;
    }
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    dlock_set_lost_cb(d, on_lost, run);
    if (verbose) fprintf(stderr, "dlock: %s: campaigning as %s\n", run->name, value);
    int r = dlock_elect(d, run->name, value, lease_ms, &fence);
    if (r != 0) {
        fprintf(stderr, "dlock: %s: %s\n", run->name,
                r == DLOCK_EKIND ? not_an_election
                : r == DLOCK_EARGS ? "bad --value or lease (a value is 1-255 printable "
                                     "characters without blanks)"
                : dlock_strerror(r));
        dlock_close(d);
        return exit_for(r);
    }
    snprintf(num, sizeof(num), "%llu", (unsigned long long)fence);
    setenv("DLOCK_NAME", run->name, 1);
    setenv("DLOCK_FENCE", num, 1);
    setenv("DLOCK_LEADER_VALUE", value, 1);
    unsetenv("DLOCK_PERMITS");
    if (verbose) fprintf(stderr, "dlock: %s: leading (fence %s)\n", run->name, num);
    int code = run_child(d, run, argv, grace_ms);
    if (!run->lost) dlock_resign(d, run->name, NULL); /* the next candidate leads now */
    dlock_close(d);
    return code;
}

/* -m NAME...: takes every name at once (MLOCK or TRYMLOCK), runs argv
 * with DLOCK_NAMES and DLOCK_FENCES, and releases them all when it exits. */
static int multi(const char *sock, run_t *run, long long wait, uint32_t lease_ms,
                 uint32_t conflict, char **argv, uint32_t grace_ms, int verbose) {
    uint64_t fences[DLOCK_MNAMES_MAX];
    char names[DLOCK_MNAMES_MAX * (DLOCK_NAME_MAX + 1) + 1], list[DLOCK_MNAMES_MAX * 21 + 1];
    size_t nlen = 0, flen = 0;
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    dlock_set_lost_cb(d, on_lost, run);
    int r = wait < 0 ? dlock_mlock(d, run->n, run->names, lease_ms, fences)
                     : dlock_trymlock(d, run->n, run->names, (uint32_t)wait, lease_ms, fences,
                                      NULL);
    if (r == DLOCK_ETIMEOUT) {
        dlock_close(d);
        return (int)conflict;
    }
    if (r != 0) {
        fprintf(stderr, "dlock: %s%s: %s\n", run->names[0], run->n > 1 ? " ..." : "",
                r == DLOCK_EKIND ? "one of the names is held as a read/write lock, a "
                                   "semaphore, a fair lock or an election (-m takes plain "
                                   "locks)"
                : r == DLOCK_ETOOLONG ? "the names do not fit one request line (4096 bytes)"
                : dlock_strerror(r));
        dlock_close(d);
        return r == DLOCK_ETOOLONG ? EXIT_USAGE : exit_for(r);
    }
    for (size_t i = 0; i < run->n; i++) {
        nlen += (size_t)snprintf(names + nlen, sizeof(names) - nlen, "%s%s", i ? " " : "",
                                 run->names[i]);
        flen += (size_t)snprintf(list + flen, sizeof(list) - flen, "%s%llu", i ? " " : "",
                                 (unsigned long long)fences[i]);
    }
    setenv("DLOCK_NAMES", names, 1);
    setenv("DLOCK_FENCES", list, 1);
    /* An outer dlock's must not show through. */
    unsetenv("DLOCK_NAME");
    unsetenv("DLOCK_FENCE");
    unsetenv("DLOCK_PERMITS");
    if (verbose) fprintf(stderr, "dlock: %s: acquired (fences %s)\n", names, list);
    int code = run_child(d, run, argv, grace_ms);
    dlock_close(d); /* releases every name */
    return code;
}

/* --list: the rows kept to align the table. */
typedef struct rows_s {
    dlock_list_entry_t *e;
    size_t n, cap;
    int failed;
} rows_t;

static int on_list_entry(void *data, const dlock_list_entry_t *e) {
    rows_t *r = data;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        dlock_list_entry_t *ne = realloc(r->e, nc * sizeof(*ne));
        if (ne == NULL) {
            r->failed = 1;
            return 1;
        }
        r->e = ne;
        r->cap = nc;
    }
    r->e[r->n++] = *e;
    return 0;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

static void json_num(const char *key, long long v) {
    if (v < 0)
        printf("\"%s\":null", key);
    else
        printf("\"%s\":%lld", key, v);
}

static void json_who(const dlock_who_t *w, size_t n) {
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"host\":", i ? "," : "");
        if (w[i].host[0])
            json_str(w[i].host);
        else
            printf("null");
        putchar(',');
        json_num("dlockd_pid", w[i].dlockd_pid);
        putchar(',');
        json_num("pid", w[i].pid);
        putchar(',');
        json_num("uid", w[i].uid);
        putchar(',');
        json_num("count", w[i].count);
        putchar(',');
        json_num("age_ms", w[i].age_ms);
        putchar('}');
    }
    putchar(']');
}

/* "host:dlockd_pid pid P uid U", or "-" (a Redisson client). */
static void who_text(char *out, size_t cap, const dlock_who_t *w) {
    char pid[48] = "";
    if (w->pid >= 0) snprintf(pid, sizeof(pid), " pid %lld uid %lld", w->pid, w->uid);
    if (w->host[0])
        snprintf(out, cap, "%s:%lld%s", w->host, w->dlockd_pid, pid);
    else
        snprintf(out, cap, "-");
}

static void secs(char *out, size_t cap, const char *what, long long ms) {
    snprintf(out, cap, "%s %lld.%llds", what, ms / 1000, ms % 1000 / 100);
}

/* One row's cells: holder, age or ttl, fence, waiters. */
static void cells(const dlock_list_entry_t *e, char c[4][160]) {
    if (e->nholders > 0) {
        who_text(c[0], 160, &e->holders[0]);
        if (e->holders_total > 1) {
            size_t l = strlen(c[0]);
            snprintf(c[0] + l, 160 - l, " +%zu", e->holders_total - 1);
        }
    } else {
        snprintf(c[0], 160, "-");
    }
    if (e->nholders > 0 && e->holders[0].age_ms >= 0)
        secs(c[1], 160, "age", e->holders[0].age_ms);
    else if (e->ttl_ms >= 0)
        secs(c[1], 160, "ttl", e->ttl_ms);
    else
        snprintf(c[1], 160, "-");
    if (e->fence > 0)
        snprintf(c[2], 160, "%llu", (unsigned long long)e->fence);
    else
        snprintf(c[2], 160, "-");
    size_t l = (size_t)snprintf(c[3], 160, "%zu", e->waiters_total);
    for (size_t i = 0; i < e->nwaiters && l < 120; i++) {
        if (e->waiters[i].pid >= 0)
            l += (size_t)snprintf(c[3] + l, 160 - l, "%spid %lld", i ? ", " : " (", e->waiters[i].pid);
        else if (e->waiters[i].host[0])
            l += (size_t)snprintf(c[3] + l, 160 - l, "%s%s:%lld", i ? ", " : " (", e->waiters[i].host,
                                  e->waiters[i].dlockd_pid);
        else
            l += (size_t)snprintf(c[3] + l, 160 - l, "%s-", i ? ", " : " (");
        if (i + 1 == e->nwaiters && l < 158) c[3][l++] = ')', c[3][l] = '\0';
    }
}

/* --list: LIST PATTERN [LIMIT] as a table or JSON. 0, or the exit code
 * after saying why. */
static int list_locks(const char *sock, const char *pattern, uint32_t limit, int json) {
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    rows_t rows = {0};
    int more = 0;
    int r = dlock_list(d, pattern, limit, on_list_entry, &rows, &more);
    dlock_close(d);
    if (r < 0 || rows.failed) {
        fprintf(stderr, "dlock: LIST: %s\n", rows.failed ? "out of memory" : dlock_strerror(r));
        free(rows.e);
        return r < 0 ? exit_for(r) : EXIT_SOFTWARE;
    }
    if (json) {
        printf("{\"pattern\":");
        json_str(pattern ? pattern : "*");
        printf(",\"count\":%zu,\"more\":%s,\"locks\":[", rows.n, more ? "true" : "false");
        for (size_t i = 0; i < rows.n; i++) {
            const dlock_list_entry_t *e = &rows.e[i];
            printf("%s{\"name\":", i ? "," : "");
            json_str(e->name);
            printf(",\"kind\":\"%s\",", e->kind);
            json_num("ttl_ms", e->ttl_ms);
            putchar(',');
            json_num("fence", e->fence > 0 ? (long long)e->fence : -1);
            printf(",\"holders_total\":%zu,\"holders\":", e->holders_total);
            json_who(e->holders, e->nholders);
            printf(",\"waiters_total\":%zu,\"waiters\":", e->waiters_total);
            json_who(e->waiters, e->nwaiters);
            printf(",\"value\":");
            if (e->value[0])
                json_str(e->value);
            else
                printf("null");
            putchar('}');
        }
        printf("]}\n");
    } else {
        static const char *const head[6] = {"NAME", "KIND", "HOLDER", "AGE/TTL", "FENCE",
                                            "WAITERS"};
        size_t wd[6];
        for (int k = 0; k < 6; k++) wd[k] = strlen(head[k]);
        char c[4][160];
        for (size_t i = 0; i < rows.n; i++) {
            cells(&rows.e[i], c);
            size_t l[6] = {strlen(rows.e[i].name), strlen(rows.e[i].kind), strlen(c[0]),
                           strlen(c[1]), strlen(c[2]), 0};
            for (int k = 0; k < 5; k++)
                if (l[k] > wd[k]) wd[k] = l[k];
        }
        printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", (int)wd[0], head[0], (int)wd[1], head[1],
               (int)wd[2], head[2], (int)wd[3], head[3], (int)wd[4], head[4], head[5]);
        for (size_t i = 0; i < rows.n; i++) {
            cells(&rows.e[i], c);
            printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", (int)wd[0], rows.e[i].name, (int)wd[1],
                   rows.e[i].kind, (int)wd[2], c[0], (int)wd[3], c[1], (int)wd[4], c[2], c[3]);
        }
        if (more) printf("(more match: raise --limit or narrow the pattern)\n");
    }
    free(rows.e);
    return 0;
}

/* A count-down latch's request (--latch-set, --countdown, --await). */
typedef enum { LATCH_SET, LATCH_COUNTDOWN, LATCH_AWAIT } latch_op_t;

/* --latch-set N NAME (LATCHSET), --countdown NAME (COUNTDOWN: the count left
 * on stdout), --await NAME (AWAIT, or TRYAWAIT with -n or -w: wait_ms >= 0).
 * 0; conflict when the count was not 0 in time; or dlock's exit code after
 * saying why. One raw request (dlock_request): the connection closes with
 * the process, which withdraws a wait cut short by a signal. */
static int latch(const char *sock, latch_op_t op, const char *name, uint32_t count,
                 long long wait_ms, int conflict, int verbose) {
    char line[DLOCK_NAME_MAX + 48], reply[DLOCK_LINE_MAX + 1] = "";
    if (op == LATCH_SET) snprintf(line, sizeof(line), "LATCHSET %s %u", name, count);
    else if (op == LATCH_COUNTDOWN) snprintf(line, sizeof(line), "COUNTDOWN %s", name);
    else if (wait_ms < 0) snprintf(line, sizeof(line), "AWAIT %s", name);
    else snprintf(line, sizeof(line), "TRYAWAIT %s %lld", name, wait_ms);
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    int r = dlock_request(d, line, reply, sizeof(reply));
    dlock_close(d);
    if (r == DLOCK_ETIMEOUT) {
        if (verbose) fprintf(stderr, "dlock: %s: count still %s\n", name, reply + 8);
        return conflict;
    }
    if (r != 0) {
        /* dlockd's own words say what the name is ("x is held as a plain
         * lock ...", "count-down latches are not available with quorum") */
        if (r == DLOCK_EKIND && strncmp(reply, "ERR KIND ", 9) == 0)
            fprintf(stderr, "dlock: %s\n", reply + 9);
        else
            fprintf(stderr, "dlock: %s: %s\n", name, dlock_strerror(r));
        return exit_for(r);
    }
    long long n;
    if (sscanf(reply, "OK %lld", &n) != 1) {
        fprintf(stderr, "dlock: %s: unexpected reply '%s'\n", name, reply);
        return EXIT_SOFTWARE;
    }
    if (op == LATCH_COUNTDOWN) printf("%lld\n", n);
    if (!verbose) return 0;
    if (op == LATCH_SET && n == 1) fprintf(stderr, "dlock: %s: latch set to %u\n", name, count);
    else if (op == LATCH_SET) fprintf(stderr, "dlock: %s: latch was set already (unchanged)\n", name);
    else if (op == LATCH_AWAIT) fprintf(stderr, "dlock: %s: count is 0\n", name);
    return 0;
}

/* --seminit: SEMINIT NAME PERMITS. 0, or dlock's exit code after saying why. */
static int seminit(dlock_t *d, const char *name, uint32_t permits, int verbose) {
    int set = 0;
    int r = dlock_seminit(d, name, permits, &set);
    if (r != 0) {
        fprintf(stderr, "dlock: %s: %s\n", name,
                r == DLOCK_EKIND ? not_a_semaphore : dlock_strerror(r));
        return exit_for(r);
    }
    if (verbose && set)
        fprintf(stderr, "dlock: %s: semaphore set to %u permits\n", name, permits);
    else if (verbose)
        fprintf(stderr, "dlock: %s: semaphore had its permits already (unchanged)\n", name);
    return 0;
}

int main(int argc, char **argv) {
    enum { OPT_STATUS = 256, OPT_FORCE, OPT_INFO, OPT_PING, OPT_VERSION, OPT_METRICS, OPT_WHO,
           OPT_PERMITS, OPT_SEMINIT, OPT_FAIR, OPT_ELECT, OPT_VALUE, OPT_OBSERVE,
           OPT_LEADER, OPT_LIST, OPT_JSON, OPT_LIMIT, OPT_LATCH_SET, OPT_COUNTDOWN,
           OPT_AWAIT };
    const char *mnames[DLOCK_MNAMES_MAX];
    size_t nm = 0;
    static const struct option longopts[] = {
        {"status", required_argument, NULL, OPT_STATUS},
        {"force-unlock", required_argument, NULL, OPT_FORCE},
        {"info", no_argument, NULL, OPT_INFO},
        {"ping", no_argument, NULL, OPT_PING},
        {"metrics", no_argument, NULL, OPT_METRICS},
        {"who", required_argument, NULL, OPT_WHO},
        {"version", no_argument, NULL, OPT_VERSION},
        {"socket", required_argument, NULL, 'S'},
        {"shared", no_argument, NULL, 's'},
        {"exclusive", no_argument, NULL, 'x'},
        {"fair", no_argument, NULL, OPT_FAIR},
        {"permits", required_argument, NULL, OPT_PERMITS},
        {"seminit", required_argument, NULL, OPT_SEMINIT},
        {"verbose", no_argument, NULL, 'v'},
        {"lease", required_argument, NULL, 'l'},
        {"elect", required_argument, NULL, OPT_ELECT},
        {"value", required_argument, NULL, OPT_VALUE},
        {"observe", required_argument, NULL, OPT_OBSERVE},
        {"leader", required_argument, NULL, OPT_LEADER},
        {"multi", required_argument, NULL, 'm'},
        {"list", no_argument, NULL, OPT_LIST},
        {"json", no_argument, NULL, OPT_JSON},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"latch-set", required_argument, NULL, OPT_LATCH_SET},
        {"countdown", required_argument, NULL, OPT_COUNTDOWN},
        {"await", required_argument, NULL, OPT_AWAIT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = NULL;
    const lock_kind_t *kind = &plain_kind;
    int nonblock = 0, have_wait = 0, metrics = 0, shared = 0, exclusive = 0, opt;
    int have_seminit = 0, verbose = 0, fair = 0;
    uint32_t wait_ms = 0, lease_ms = 0, conflict = 1, grace_ms = DEFAULT_GRACE_MS;
    uint32_t permits = 0, sem_size = 0;
    char query_line[DLOCK_NAME_MAX + 32] = "";
    const char *elect_name = NULL, *value = NULL, *observe_name = NULL;
    int leader_once = 0;
    int list = 0, json = 0;
    uint32_t list_limit = 0;
    const char *latch_name = NULL;
    int latch_op = -1;
    uint32_t latch_count = 0;

    /* '+': stop at the first non-option, so COMMAND keeps its own options. */
    while ((opt = getopt_long(argc, argv, "+S:sxnw:E:l:k:vhm:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'S': sock = optarg; break;
        case 's': shared = 1; break;
        case 'x': exclusive = 1; break;
        case 'v': verbose = 1; break;
        case OPT_FAIR: fair = 1; break;
        case OPT_PERMITS:
            if (parse_uint(optarg, DLOCK_PERMITS_MAX, &permits) != 0 || permits == 0) {
                char range[48];
                snprintf(range, sizeof(range), " is not a number of permits (1-%d)",
                         DLOCK_PERMITS_MAX);
                return usage_error("--permits: ", optarg, range);
            }
            break;
        case OPT_SEMINIT:
            if (parse_uint(optarg, 2147483647u, &sem_size) != 0)
                return usage_error("--seminit: ", optarg,
                                   " is not a number of permits (0-2147483647)");
            have_seminit = 1;
            break;
        case 'm':
            if (optarg[0] == '\0' || strlen(optarg) > DLOCK_NAME_MAX ||
                strpbrk(optarg, " \t\r\n") != NULL)
                return usage_error("-m: ", optarg, " is not a lock name");
            for (size_t i = 0; i < nm; i++)
                if (strcmp(mnames[i], optarg) == 0)
                    return usage_error("-m: ", optarg, " is given twice");
            if (nm == DLOCK_MNAMES_MAX) {
                char most[48];
                snprintf(most, sizeof(most), "at most %d -m names", DLOCK_MNAMES_MAX);
                return usage_error(most, NULL, NULL);
            }
            mnames[nm++] = optarg;
            break;
        case 'n': nonblock = 1; break;
        case 'w':
            if (parse_seconds(optarg, &wait_ms) != 0)
                return usage_error("-w: ", optarg, " is not a number of seconds");
            have_wait = 1;
            break;
        case 'E':
            if (parse_uint(optarg, 255, &conflict) != 0)
                return usage_error("-E: ", optarg, " is not an exit code (0-255)");
            break;
        case 'l':
            if (parse_uint(optarg, 2147483647u, &lease_ms) != 0 || lease_ms == 0)
                return usage_error("-l: ", optarg, " is not a lease in milliseconds");
            break;
        case 'k':
            if (parse_seconds(optarg, &grace_ms) != 0)
                return usage_error("-k: ", optarg, " is not a number of seconds");
            break;
        case OPT_STATUS:
        case OPT_FORCE:
        case OPT_WHO:
            if (strlen(optarg) > DLOCK_NAME_MAX || strpbrk(optarg, " \t\r\n") != NULL)
                return usage_error("", optarg, " is not a lock name");
            snprintf(query_line, sizeof(query_line), "%s %s",
                     opt == OPT_STATUS ? "STATUS" : opt == OPT_WHO ? "WHO" : "FORCEUNLOCK",
                     optarg);
            break;
        case OPT_ELECT:
        case OPT_OBSERVE:
        case OPT_LEADER:
            if (strlen(optarg) > DLOCK_NAME_MAX || strpbrk(optarg, " \t\r\n") != NULL)
                return usage_error("", optarg, " is not a name");
            if (opt == OPT_ELECT) elect_name = optarg;
            else observe_name = optarg;
            leader_once = opt == OPT_LEADER;
            break;
        case OPT_VALUE:
            if (optarg[0] == '\0' || strlen(optarg) > DLOCK_VALUE_MAX ||
                strpbrk(optarg, " \t\r\n") != NULL)
                return usage_error("--value: ", optarg,
                                   " is not a value (1-255 printable characters, no blanks)");
            value = optarg;
            break;
        case OPT_INFO: snprintf(query_line, sizeof(query_line), "INFO"); break;
        case OPT_PING: snprintf(query_line, sizeof(query_line), "PING"); break;
        case OPT_METRICS: metrics = 1; break;
        case OPT_LIST: list = 1; break;
        case OPT_JSON: json = 1; break;
        case OPT_LIMIT:
            if (parse_uint(optarg, DLOCK_LIST_MAX, &list_limit) != 0 || list_limit < 1 ||
                list_limit > DLOCK_LIST_MAX)
                return usage_error("--limit: ", optarg, " (1 to 1000)");
            break;
        case OPT_LATCH_SET:
            if (parse_uint(optarg, 2147483647u, &latch_count) != 0 || latch_count == 0)
                return usage_error("--latch-set: ", optarg, " is not a count (1-2147483647)");
            if (latch_op >= 0) return usage_error("one latch option at a time", NULL, NULL);
            latch_op = LATCH_SET;
            break;
        case OPT_COUNTDOWN:
        case OPT_AWAIT:
            if (strlen(optarg) > DLOCK_NAME_MAX || strpbrk(optarg, " \t\r\n") != NULL)
                return usage_error("", optarg, " is not a name");
            if (latch_op >= 0) return usage_error("one latch option at a time", NULL, NULL);
            latch_op = opt == OPT_AWAIT ? LATCH_AWAIT : LATCH_COUNTDOWN;
            latch_name = optarg;
            break;
        case OPT_VERSION: printf("dlock %s\n", DLOCKD_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (latch_op >= 0) {
        if (nm > 0 || list || metrics || query_line[0] != '\0' || observe_name != NULL ||
            elect_name != NULL || value != NULL || shared || exclusive || fair || permits ||
            have_seminit || lease_ms)
            return usage_error("--latch-set, --countdown and --await go alone (with -S, -v, "
                               "and --await with -n, -w and -E)", NULL, NULL);
        if (latch_op != LATCH_AWAIT && (nonblock || have_wait))
            return usage_error("-n and -w go with --await", NULL, NULL);
        if (nonblock && have_wait) return usage_error("-n and -w exclude each other", NULL, NULL);
        if (latch_op == LATCH_SET) {
            if (optind == argc) return usage_error("--latch-set N: missing NAME", NULL, NULL);
            latch_name = argv[optind++];
            if (latch_name[0] == '\0' || strlen(latch_name) > DLOCK_NAME_MAX ||
                strpbrk(latch_name, " \t\r\n") != NULL)
                return usage_error("", latch_name, " is not a name");
        }
        if (optind < argc) return usage_error("unexpected argument ", argv[optind], "");
        long long wait = nonblock ? 0 : have_wait ? (long long)wait_ms : -1;
        return latch(sock, (latch_op_t)latch_op, latch_name, latch_count, wait, (int)conflict,
                     verbose);
    }
    if (nm > 0 && (list || metrics || query_line[0] != '\0' || observe_name != NULL ||
                   elect_name != NULL))
        return usage_error("-m excludes --list, --elect, --observe, --leader, --status, --who, "
                           "--force-unlock, --info, --ping and --metrics", NULL, NULL);
    if (list) {
        if (optind + 1 < argc) return usage_error("unexpected argument ", argv[optind + 1], "");
        return list_locks(sock, optind < argc ? argv[optind] : NULL, list_limit, json);
    }
    if (json || list_limit) return usage_error("--json and --limit go with --list", NULL, NULL);
    if (metrics) {
        if (optind < argc) return usage_error("unexpected argument ", argv[optind], "");
        return show_metrics(sock);
    }
    if (query_line[0] != '\0') {
        if (optind < argc) return usage_error("unexpected argument ", argv[optind], "");
        return query(sock, query_line);
    }
    if (observe_name != NULL) {
        if (optind < argc) return usage_error("unexpected argument ", argv[optind], "");
        if (elect_name != NULL)
            return usage_error("--elect excludes --observe and --leader", NULL, NULL);
        return observe(sock, observe_name, leader_once);
    }
    if (value != NULL && elect_name == NULL)
        return usage_error("--value goes with --elect", NULL, NULL);
    if (elect_name != NULL) {
        if (shared || exclusive || fair || permits || have_seminit || nonblock || have_wait)
            return usage_error("--elect excludes -s, -x, --fair, --permits, --seminit, -n "
                               "and -w", NULL, NULL);
        if (optind == argc) return usage_error("missing COMMAND", NULL, NULL);
        run_t run = {.name = elect_name, .what = "leadership of",
                     .lost_code = EXIT_TEMPFAIL};
        return elect(sock, &run, value, lease_ms, argv + optind, grace_ms, verbose);
    }
    if (nonblock && have_wait) return usage_error("-n and -w exclude each other", NULL, NULL);
    if (nm > 0) {
        if (shared || exclusive || fair || permits || have_seminit)
            return usage_error("-m excludes -s, -x, --fair, --permits and --seminit", NULL,
                               NULL);
        if (optind == argc) return usage_error("missing COMMAND", NULL, NULL);
        run_t run = {.name = mnames[0], .names = mnames, .n = nm, .what = "lock",
                     .lost_code = EXIT_LOST};
        long long wait = nonblock ? 0 : have_wait ? (long long)wait_ms : -1;
        return multi(sock, &run, wait, lease_ms, conflict, argv + optind, grace_ms, verbose);
    }
    if (shared && exclusive) return usage_error("-s and -x exclude each other", NULL, NULL);
    if (fair && (shared || exclusive || permits || have_seminit))
        return usage_error("--fair excludes -s, -x, --permits and --seminit", NULL, NULL);
    if (permits && (shared || exclusive))
        return usage_error("--permits excludes -s and -x", NULL, NULL);
    if (have_seminit && (shared || exclusive))
        return usage_error("--seminit excludes -s and -x", NULL, NULL);
    /* --seminit N NAME alone sets the permits and is done. */
    int init_only = have_seminit && !permits && optind + 1 == argc;
    if (optind + 2 > argc && !init_only)
        return usage_error(optind == argc ? "missing NAME and COMMAND" : "missing COMMAND", NULL, NULL);
    if (have_seminit && !permits && !init_only)
        return usage_error("--seminit with a COMMAND needs --permits", NULL, NULL);
    if (shared) kind = &read_kind;
    if (exclusive) kind = &write_kind;
    if (fair) kind = &fair_kind;
    if (permits) kind = &sem_kind;

    run_t run = {.name = argv[optind], .what = "lock", .lost_code = EXIT_LOST};
    /* -s used to name the socket: say so when NAME looks like one. */
    struct stat st;
    if (shared && stat(run.name, &st) == 0 && S_ISSOCK(st.st_mode))
        fprintf(stderr, "dlock: note: -s takes a read lock (--shared); %s is a socket: "
                        "name dlockd's socket with -S\n", run.name);
    dlock_t *d = connect_or_say(sock);
    if (d == NULL) return EXIT_UNAVAILABLE;
    dlock_set_lost_cb(d, on_lost, &run);

    if (have_seminit) {
        int code = seminit(d, run.name, sem_size, verbose);
        if (code != 0 || init_only) {
            dlock_close(d);
            return code;
        }
    }

    grant_t grant = {.permits = permits};
    long long wait = nonblock ? 0 : have_wait ? (long long)wait_ms : -1;
    int r = kind->take(d, run.name, wait, lease_ms, &grant);
    if (r == DLOCK_ETIMEOUT) {
        dlock_close(d);
        return (int)conflict;
    }
    if (r != 0) {
        fprintf(stderr, "dlock: %s: %s\n", run.name,
                r == DLOCK_EKIND ? kind->on_kind : dlock_strerror(r));
        dlock_close(d);
        return exit_for(r);
    }

    char num[24];
    setenv("DLOCK_NAME", run.name, 1);
    if (kind == &sem_kind) {
        /* A semaphore has no fence: an outer dlock's must not show through. */
        snprintf(num, sizeof(num), "%u", grant.permits);
        setenv("DLOCK_PERMITS", num, 1);
        unsetenv("DLOCK_FENCE");
        if (verbose)
            fprintf(stderr, "dlock: %s: acquired %u permits\n", run.name, grant.held);
    } else {
        snprintf(num, sizeof(num), "%llu", (unsigned long long)grant.fence);
        setenv("DLOCK_FENCE", num, 1);
        unsetenv("DLOCK_PERMITS");
        if (verbose) fprintf(stderr, "dlock: %s: acquired (fence %s)\n", run.name, num);
    }
    int code = run_child(d, &run, argv + optind + 1, grace_ms);
    dlock_close(d); /* releases the lock */
    return code;
}
