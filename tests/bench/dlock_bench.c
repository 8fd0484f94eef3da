/* dlock-bench: load generator for dlockd benchmarks (`make bench`).
 *
 *   dlock-bench throughput -s SOCK [-c 50] [-d 10] [-w 1] [-m read|sem -k NAME [-p PERMITS] | -m multi [-p NAMES]]
 *   dlock-bench blocking   -s SOCK [-c 8] [-d 10] [-w 1]   -c processes, libdlock's blocking calls
 *   dlock-bench fleet      -s PREFIX [-N 32] [-c 8] [-K 65536] [-d 10] [-w 1]
 *                          -N x -c processes, -c per dlockd PREFIX<h>.sock, -K shared names
 *   dlock-bench handoff    -s SOCK1 [-S SOCK2 -R REDIS_SOCK] [-n 1000] [-k NAME]
 *   dlock-bench fair       -s SOCK [-c 100] [-n 1000] [-k NAME]   a fair lock's hand-off, 99 queued
 *   dlock-bench hol        -s SOCK [-c 100] [-n 10] [-w 1] [-k PREFIX] [-r SEED]
 *                          -c tagged waits on one connection, released in a random order
 *   dlock-bench tagged     -s SOCK [-c 50] [-d 10] [-w 1]
 *                          -c tagged LOCK/UNLOCK loops on one connection
 *   dlock-bench scale      -s SOCK [-c 10000] [-l 10] [-H 40]
 *   dlock-bench herd       -s SOCK [-c 1000] [-R REDIS_SOCK] [-k NAME]
 *   dlock-bench upgrade    -s SOCK [-c 10000] [-l 10] [-n 1000] [-p 4] [-w 1] [-t 30000]
 *                          -c x -l holds, -n waiting, -p probes timed across a SIGUSR2
 *   dlock-bench redisping  -s REDIS_SOCK [-n 10000]
 *   dlock-bench wait       -s SOCK [-t 5000]     until dlockd answers INFO with redis=up
 *   dlock-bench info       -s SOCK               prints dlockd's INFO line
 *
 * libc: non-blocking Unix sockets, epoll for the many-connection
 * subcommands, poll for the lock-step ones; single-threaded. `blocking`
 * and `fleet` alone use libdlock (clients/c), in processes of their own. Results go to
 * stdout as key=value words. Exit status: 0 done, 2 usage, 1 a local
 * problem (out of memory, file limits), 3 the daemon (or Redis)
 * misbehaved: refused a connection, closed one, answered something
 * unexpected, or stopped answering. The reason is on stderr.
 *
 * Lines starting with '!' are dlockd events; they are counted and skipped.
 * SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clients/c/dlock.h"

#define EXIT_LOCAL 1
#define EXIT_USAGE 2
#define EXIT_DAEMON 3

/* No reply of any kind for this long means the daemon hangs. */
#define STALL_US (15 * 1000000LL)
/* A lock-step reply (PING, INFO, a grant expected now) within this. */
#define REPLY_TIMEOUT_MS 10000

/* ---- small helpers ----------------------------------------------------- */

static const char *prog = "dlock-bench";
static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
    (void)sig;
    got_signal = 1;
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us) {
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !got_signal) {
    }
}

__attribute__((format(printf, 2, 3), noreturn)) static void die(int code, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: %s: ", prog,
            code == EXIT_DAEMON ? "daemon problem" : code == EXIT_USAGE ? "usage" : "error");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) die(EXIT_LOCAL, "out of memory (%zu bytes)", n);
    return p;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) die(EXIT_LOCAL, "out of memory (%zu bytes)", n);
    return q;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static int64_t pct(const int64_t *v, size_t n, double p) {
    if (n == 0) return -1;
    size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

/* A growing array of samples. */
typedef struct {
    int64_t *v;
    size_t n, cap;
} samples_t;

static void samples_add(samples_t *s, int64_t x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = x;
}

/* ---- connections ------------------------------------------------------- */

enum {
    ST_IDLE = 0,
    ST_LOCK_SENT,   /* waiting for OK <fence> <holds> */
    ST_UNLOCK_SENT, /* waiting for OK 0 */
    ST_DONE
};

typedef struct conn_s {
    int fd;
    int id;
    int state;
    int want_out;    /* EPOLLOUT registered */
    int granted;     /* scale: grants received */
    char *in;        /* unparsed input */
    size_t inlen, incap;
    char *out;       /* output the socket did not take yet */
    size_t outlen, outcap;
    int64_t sent_at; /* throughput: when the LOCK went out */
} conn_t;

static long long events_seen; /* '!' lines, over all connections */

/* Connects to a Unix socket (blocking, so a full listen backlog waits
 * rather than fails; bounded by SO_SNDTIMEO), then goes non-blocking. */
static int unix_connect(const char *path, int timeout_ms, int fatal) {
    struct sockaddr_un sa;
    if (strlen(path) >= sizeof(sa.sun_path)) die(EXIT_USAGE, "socket path too long: %s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(EXIT_LOCAL, "socket: %s (raise ulimit -n?)", strerror(errno));
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, path);
    int rc;
    do rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int e = errno;
        close(fd);
        if (!fatal) return -1;
        die(EXIT_DAEMON, "connect %s: %s", path, e == EAGAIN ? "timed out (backlog full)" : strerror(e));
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
}

static void conn_init(conn_t *c, int fd, int id) {
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->id = id;
}

static conn_t *conn_open(const char *path, int id) {
    conn_t *c = xmalloc(sizeof(*c));
    conn_init(c, unix_connect(path, REPLY_TIMEOUT_MS, 1), id);
    return c;
}

static void conn_free_bufs(conn_t *c) {
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->inlen = c->incap = c->outlen = c->outcap = 0;
}

static void conn_close(conn_t *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    conn_free_bufs(c);
}

/* Writes what the socket takes; keeps the rest. Returns bytes still pending. */
static size_t conn_flush(conn_t *c) {
    size_t off = 0;
    while (off < c->outlen) {
        ssize_t n = send(c->fd, c->out + off, c->outlen - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            die(EXIT_DAEMON, "connection %d: write: %s (daemon closed it?)", c->id,
                n < 0 ? strerror(errno) : "0 bytes");
        }
    }
    memmove(c->out, c->out + off, c->outlen - off);
    c->outlen -= off;
    return c->outlen;
}

/* Queues data to go out with the next conn_flush (or conn_send). */
static void conn_queue(conn_t *c, const char *data, size_t len) {
    if (c->outlen + len > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 256;
        while (cap < c->outlen + len) cap *= 2;
        c->out = xrealloc(c->out, cap);
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, data, len);
    c->outlen += len;
}

/* Queues data and writes as much as the socket takes now. */
static size_t conn_send(conn_t *c, const char *data, size_t len) {
    conn_queue(c, data, len);
    return conn_flush(c);
}

/* Reads what is there. Returns bytes read, 0 when nothing is there now;
 * EOF and errors end the program: the daemon must not close on us. */
static size_t conn_read(conn_t *c) {
    size_t total = 0;
    for (;;) {
        if (c->incap - c->inlen < 1024) {
            c->incap = c->incap ? c->incap * 2 : 2048;
            c->in = xrealloc(c->in, c->incap);
        }
        ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
        if (n > 0) {
            c->inlen += (size_t)n;
            total += (size_t)n;
            if ((size_t)n < c->incap - c->inlen) return total;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return total;
        die(EXIT_DAEMON, "connection %d: %s", c->id,
            n == 0 ? "closed by the daemon" : strerror(errno));
    }
}

/* Takes one complete reply line (not an event) out of c->in into line,
 * without its LF (and CR). Returns 1 if one was there. */
static int conn_line(conn_t *c, char *line, size_t cap) {
    for (;;) {
        char *nl = memchr(c->in, '\n', c->inlen);
        if (nl == NULL) return 0;
        size_t len = (size_t)(nl - c->in), used = len + 1;
        if (len > 0 && c->in[len - 1] == '\r') len--;
        int event = len > 0 && c->in[0] == '!';
        if (!event) {
            if (len >= cap) len = cap - 1;
            memcpy(line, c->in, len);
            line[len] = '\0';
        } else {
            events_seen++;
        }
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
        if (!event) return 1;
    }
}

/* Lock-step helpers with a deadline (poll). */
static void sync_send(conn_t *c, const char *data, size_t len) {
    int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL;
    conn_send(c, data, len);
    while (c->outlen > 0) {
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        int64_t left = (end - now_us()) / 1000;
        if (left <= 0) die(EXIT_DAEMON, "connection %d: the daemon does not read", c->id);
        poll(&p, 1, (int)left);
        conn_flush(c);
    }
}

static void sync_line(conn_t *c, char *line, size_t cap, const char *what) {
    int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL;
    while (!conn_line(c, line, cap)) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int64_t left = (end - now_us()) / 1000;
        if (left <= 0) die(EXIT_DAEMON, "no reply to %s within %d ms", what, REPLY_TIMEOUT_MS);
        int rc = poll(&p, 1, (int)(left > 0 ? left : 1));
        if (rc > 0) conn_read(c);
    }
}

/* Sends a request and returns its reply line. */
static void request(conn_t *c, const char *req, char *line, size_t cap) {
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "%s\n", req);
    sync_send(c, buf, (size_t)n);
    sync_line(c, line, cap, req);
}

static int starts_with(const char *s, const char *p) {
    return strncmp(s, p, strlen(p)) == 0;
}

/* A grant: "OK <fence> <holds>". Returns the fence, or 0 if not a grant. */
static unsigned long long parse_grant(const char *line, long *holds) {
    unsigned long long fence;
    long h;
    char extra;
    if (sscanf(line, "OK %llu %ld%c", &fence, &h, &extra) != 2 || fence == 0) return 0;
    if (holds) *holds = h;
    return fence;
}

/* "OK 0 <holds>": a read grant of a name no write grant ever raised. */
static int read_grant(const char *line, long *holds) {
    char extra;
    return sscanf(line, "OK 0 %ld%c", holds, &extra) == 1;
}

/* The value of key in an INFO line, or -1. */
static long long info_value(const char *line, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') return strtoll(p + kl + 1, NULL, 10);
    }
    return -1;
}

static long long daemon_info(conn_t *admin, const char *key, char *line, size_t cap) {
    request(admin, "INFO", line, cap);
    if (!starts_with(line, "OK ")) die(EXIT_DAEMON, "INFO answered: %s", line);
    long long v = info_value(line, key);
    if (v < 0) die(EXIT_DAEMON, "INFO has no %s: %s", key, line);
    return v;
}

/* Polls INFO until key == want (or >= want when at_least). */
static void wait_info(conn_t *admin, const char *key, long long want, int at_least,
                      int timeout_ms, conn_t **watch, size_t nwatch) {
    char line[2048];
    int64_t end = now_us() + timeout_ms * 1000LL;
    int64_t pause = 20;
    for (;;) {
        long long v = daemon_info(admin, key, line, sizeof(line));
        if (v == want || (at_least && v > want)) return;
        /* A waiter must not be answered while the lock is held. */
        for (size_t i = 0; i < nwatch; i++) {
            char l2[512];
            conn_read(watch[i]);
            if (conn_line(watch[i], l2, sizeof(l2)))
                die(EXIT_DAEMON, "a waiting LOCK was answered while the lock was held: %s", l2);
        }
        if (now_us() > end)
            die(EXIT_DAEMON, "INFO %s stayed at %lld, expected %lld (after %d ms)", key, v, want,
                timeout_ms);
        sleep_us(pause);
        if (pause < 2000) pause *= 2;
    }
}

static void raise_nofile(size_t need) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) die(EXIT_LOCAL, "getrlimit: %s", strerror(errno));
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < need)
        die(EXIT_LOCAL, "need %zu open files, the limit is %llu (ulimit -n)", need,
            (unsigned long long)rl.rlim_cur);
}

/* ---- epoll ------------------------------------------------------------- */

static int ep = -1;

static void ep_add(conn_t *c) {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        die(EXIT_LOCAL, "epoll_ctl: %s", strerror(errno));
}

/* Sends and keeps EPOLLOUT registered exactly while output is pending. */
static void ep_send(conn_t *c, const char *data, size_t len) {
    size_t left = conn_send(c, data, len);
    if ((left > 0) != (c->want_out != 0)) {
        c->want_out = left > 0;
        struct epoll_event ev = {.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

static void ep_writable(conn_t *c) {
    size_t left = conn_flush(c);
    if (left == 0 && c->want_out) {
        c->want_out = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

static void ep_init(void) {
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die(EXIT_LOCAL, "epoll_create1: %s", strerror(errno));
}

/* ---- options ----------------------------------------------------------- */

typedef struct {
    const char *sock, *sock2, *redis, *name, *mode;
    long conns, seconds, warmup, rounds, locks, hold, timeout_ms, permits;
    long hosts, names; /* fleet: -N dlockd sockets, -K lock names */
    long seed;         /* hol: -r, the release order's seed */
    int has_seed;
} opts_t;

static long num_arg(const char *flag, const char *v) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < 0) die(EXIT_USAGE, "%s wants a non-negative number, not '%s'", flag, v);
    return x;
}

static void parse_opts(int argc, char **argv, opts_t *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) die(EXIT_USAGE, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-s")) o->sock = v;
        else if (!strcmp(a, "-S")) o->sock2 = v;
        else if (!strcmp(a, "-R")) o->redis = v;
        else if (!strcmp(a, "-k")) o->name = v;
        else if (!strcmp(a, "-m")) o->mode = v;
        else if (!strcmp(a, "-c")) o->conns = num_arg(a, v);
        else if (!strcmp(a, "-d")) o->seconds = num_arg(a, v);
        else if (!strcmp(a, "-w")) o->warmup = num_arg(a, v);
        else if (!strcmp(a, "-n")) o->rounds = num_arg(a, v);
        else if (!strcmp(a, "-l")) o->locks = num_arg(a, v);
        else if (!strcmp(a, "-H")) o->hold = num_arg(a, v);
        else if (!strcmp(a, "-t")) o->timeout_ms = num_arg(a, v);
        else if (!strcmp(a, "-p")) o->permits = num_arg(a, v);
        else if (!strcmp(a, "-N")) o->hosts = num_arg(a, v);
        else if (!strcmp(a, "-K")) o->names = num_arg(a, v);
        else if (!strcmp(a, "-r")) o->seed = num_arg(a, v), o->has_seed = 1;
        else die(EXIT_USAGE, "unknown option %s", a);
    }
    if (o->sock == NULL) die(EXIT_USAGE, "-s SOCKET is required");
}

/* ---- RESP (Redis) ------------------------------------------------------ */

/* One parsed reply, flattened: up to 8 scalars of a (possibly nested) array. */
typedef struct {
    char type;          /* of the top-level reply: + - : $ * */
    int n;              /* scalars */
    char t[8];
    long long num[8];
    const char *str[8];
    long long len[8];
} resp_t;

/* Parses one value at p; returns bytes used, 0 if incomplete. */
static size_t resp_parse(const char *p, size_t avail, resp_t *r, int depth) {
    const char *crlf = memmem(p, avail, "\r\n", 2);
    if (crlf == NULL) return 0;
    size_t head = (size_t)(crlf - p) + 2;
    char type = p[0];
    long long v = strtoll(p + 1, NULL, 10);
    if (depth == 0) r->type = type;
    switch (type) {
    case '+':
    case '-':
    case ':':
        if (r->n < 8) {
            r->t[r->n] = type;
            r->num[r->n] = v;
            r->str[r->n] = p + 1;
            r->len[r->n] = (long long)(head - 3);
            r->n++;
        }
        return head;
    case '$':
        if (v < 0) return head;
        if (avail < head + (size_t)v + 2) return 0;
        if (r->n < 8) {
            r->t[r->n] = type;
            r->str[r->n] = p + head;
            r->len[r->n] = v;
            r->n++;
        }
        return head + (size_t)v + 2;
    case '*': {
        size_t used = head;
        for (long long i = 0; i < v; i++) {
            size_t u = resp_parse(p + used, avail - used, r, depth + 1);
            if (u == 0) return 0;
            used += u;
        }
        return used;
    }
    default:
        die(EXIT_DAEMON, "redis sent something that is not RESP: %.40s", p);
    }
}

/* Sends a command, waits for its reply; the reply's strings point into
 * c->in until the next call. */
static void redis_cmd(conn_t *c, resp_t *r, int argc, const char **argv) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (int i = -1; i < argc; i++) {
        char head[32];
        const char *arg = i < 0 ? NULL : argv[i];
        int hn = i < 0 ? snprintf(head, sizeof(head), "*%d\r\n", argc)
                       : snprintf(head, sizeof(head), "$%zu\r\n", strlen(arg));
        size_t al = arg ? strlen(arg) + 2 : 0;
        if (len + (size_t)hn + al > cap) {
            cap = (len + (size_t)hn + al) * 2;
            buf = xrealloc(buf, cap);
        }
        memcpy(buf + len, head, (size_t)hn);
        len += (size_t)hn;
        if (arg) {
            memcpy(buf + len, arg, al - 2);
            memcpy(buf + len + al - 2, "\r\n", 2);
            len += al;
        }
    }
    /* Drop the previous reply (kept so its strings stayed valid). */
    c->inlen = 0;
    sync_send(c, buf, len);
    free(buf);
    int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL;
    for (;;) {
        memset(r, 0, sizeof(*r));
        if (c->inlen > 0) {
            size_t used = resp_parse(c->in, c->inlen, r, 0);
            if (used > 0) {
                if (used != c->inlen) die(EXIT_DAEMON, "redis sent more than one reply");
                return;
            }
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int64_t left = (end - now_us()) / 1000;
        if (left <= 0) die(EXIT_DAEMON, "redis did not answer %s", argv[0]);
        if (poll(&p, 1, (int)left) > 0) conn_read(c);
    }
}

/* INFO sections as one malloc'd string. */
static char *redis_info(conn_t *c, const char *section) {
    const char *argv[3] = {"INFO", section, NULL};
    resp_t r;
    redis_cmd(c, &r, 2, argv);
    if (r.type != '$' || r.n != 1) die(EXIT_DAEMON, "INFO: unexpected reply");
    char *s = xmalloc((size_t)r.len[0] + 1);
    memcpy(s, r.str[0], (size_t)r.len[0]);
    s[r.len[0]] = '\0';
    return s;
}

/* "name:value" in INFO text. */
static long long info_field(const char *text, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl) == 0 && p[nl] == ':') return strtoll(p + nl + 1, NULL, 10);
    }
    return -1;
}

/* Per-command call counts from INFO commandstats. */
typedef struct {
    char name[64];
    long long calls;
} cmdstat_t;

static size_t parse_cmdstats(const char *text, cmdstat_t *out, size_t max) {
    size_t n = 0;
    for (const char *p = text; p && *p && n < max; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "cmdstat_", 8) != 0) continue;
        const char *colon = strchr(p, ':');
        const char *calls = colon ? strstr(colon, "calls=") : NULL;
        if (colon == NULL || calls == NULL) continue;
        size_t len = (size_t)(colon - p - 8);
        if (len >= sizeof(out[n].name)) len = sizeof(out[n].name) - 1;
        memcpy(out[n].name, p + 8, len);
        out[n].name[len] = '\0';
        out[n].calls = strtoll(calls + 6, NULL, 10);
        n++;
    }
    return n;
}

static long long cmdstat_calls(const cmdstat_t *s, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0) return s[i].calls;
    return 0;
}

static long long numsub(conn_t *r, const char *channel) {
    const char *argv[3] = {"PUBSUB", "NUMSUB", channel};
    resp_t rr;
    redis_cmd(r, &rr, 3, argv);
    if (rr.type != '*' || rr.n != 2 || rr.t[1] != ':') die(EXIT_DAEMON, "PUBSUB NUMSUB: unexpected reply");
    return rr.num[1];
}

/* ---- throughput -------------------------------------------------------- */

/* LOCK k<id>: each connection has a lock name of its own; with -m read,
 * RLOCK <name>: every connection reads one name; with -m sem, ACQUIRE
 * <name> 1: every connection takes a permit of one semaphore (of -p
 * permits, default one per connection: nobody waits); with -m multi,
 * MLOCK <p> k<id>.1 .. k<id>.<p> and MUNLOCK of them (-p names, default 4:
 * a set of names of its own). */
static const char *tp_shared; /* the read lock's or semaphore's name, or NULL */
static int tp_sem;
static long tp_multi;         /* -m multi: names per set, else 0 */

/* "<verb> <p> k<id>.1 ... k<id>.<p>\n" into buf (room for 64 names). */
static int multi_line(char *buf, size_t cap, const char *verb, int id) {
    int n = snprintf(buf, cap, "%s %ld", verb, tp_multi);
    for (long j = 1; j <= tp_multi; j++) n += snprintf(buf + n, cap - (size_t)n, " k%d.%ld", id, j);
    n += snprintf(buf + n, cap - (size_t)n, "\n");
    return n;
}

/* "OK" and tp_multi numbers, each 0 when zero is set. */
static int multi_reply(const char *line, int zero) {
    if (strncmp(line, "OK", 2) != 0) return 0;
    const char *p = line + 2;
    for (long j = 0; j < tp_multi; j++) {
        char *end;
        if (*p != ' ') return 0;
        unsigned long long v = strtoull(p + 1, &end, 10);
        if (end == p + 1 || (zero ? v != 0 : v == 0)) return 0;
        p = end;
    }
    return *p == '\0';
}

static void send_lock(conn_t *c, int64_t t) {
    char buf[2048];
    int n = tp_multi    ? multi_line(buf, sizeof(buf), "MLOCK", c->id)
            : tp_sem    ? snprintf(buf, sizeof(buf), "ACQUIRE %s 1\n", tp_shared)
            : tp_shared ? snprintf(buf, sizeof(buf), "RLOCK %s\n", tp_shared)
                        : snprintf(buf, sizeof(buf), "LOCK k%d\n", c->id);
    c->sent_at = t;
    ep_send(c, buf, (size_t)n);
}

static void send_unlock(conn_t *c) {
    char buf[2048];
    int n = tp_multi    ? multi_line(buf, sizeof(buf), "MUNLOCK", c->id)
            : tp_sem    ? snprintf(buf, sizeof(buf), "RELEASE %s 1\n", tp_shared)
            : tp_shared ? snprintf(buf, sizeof(buf), "RUNLOCK %s\n", tp_shared)
                        : snprintf(buf, sizeof(buf), "UNLOCK k%d\n", c->id);
    ep_send(c, buf, (size_t)n);
}

static int cmd_throughput(opts_t *o) {
    long nc = o->conns ? o->conns : 50;
    long secs = o->seconds ? o->seconds : 10;
    long warm = o->warmup;
    if (o->mode != NULL && strcmp(o->mode, "read") != 0 && strcmp(o->mode, "sem") != 0 &&
        strcmp(o->mode, "multi") != 0)
        die(EXIT_USAGE, "-m takes read, sem or multi, not '%s'", o->mode);
    tp_multi = o->mode != NULL && strcmp(o->mode, "multi") == 0 ? (o->permits ? o->permits : 4) : 0;
    if (tp_multi > 64) die(EXIT_USAGE, "-m multi: -p is 1 to 64");
    if (o->mode != NULL && !tp_multi && o->name == NULL)
        die(EXIT_USAGE, "-m %s needs -k NAME", o->mode);
    tp_shared = o->mode != NULL && !tp_multi ? o->name : NULL;
    tp_sem = o->mode != NULL && strcmp(o->mode, "sem") == 0;
    raise_nofile((size_t)nc + 16);
    if (tp_sem) { /* the semaphore's size, which must be this one */
        char req[320], line[512];
        long permits = o->permits ? o->permits : nc;
        conn_t *adm = conn_open(o->sock, (int)nc + 1);
        snprintf(req, sizeof(req), "SEMINIT %s %ld", tp_shared, permits);
        request(adm, req, line, sizeof(line));
        if (strcmp(line, "OK 1") != 0) die(EXIT_DAEMON, "%s answered: %s (a fresh name?)", req, line);
        conn_close(adm);
        free(adm);
    }
    ep_init();
    conn_t *cs = xmalloc((size_t)nc * sizeof(*cs));
    for (long i = 0; i < nc; i++) {
        conn_init(&cs[i], unix_connect(o->sock, REPLY_TIMEOUT_MS, 1), (int)i);
        ep_add(&cs[i]);
    }
    int64_t start = now_us();
    int64_t t0 = start + warm * 1000000LL, t1 = t0 + secs * 1000000LL;
    long long pairs = 0, all_pairs = 0;
    samples_t lat = {0};
    for (long i = 0; i < nc; i++) {
        cs[i].state = ST_LOCK_SENT;
        send_lock(&cs[i], start);
    }
    struct epoll_event evs[256];
    int64_t last_progress = start;
    char line[2048];
    for (;;) {
        int64_t now = now_us();
        if (now >= t1) break;
        if (now - last_progress > STALL_US)
            die(EXIT_DAEMON, "throughput: no reply for %lld s (daemon hangs?)",
                (long long)(STALL_US / 1000000));
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno != EINTR) die(EXIT_LOCAL, "epoll_wait: %s", strerror(errno));
        now = now_us();
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            if (evs[e].events & EPOLLOUT) ep_writable(c);
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            conn_read(c);
            while (conn_line(c, line, sizeof(line))) {
                last_progress = now;
                if (c->state == ST_LOCK_SENT) {
                    long holds = 0;
                    /* a read grant's fence is 0 while the name was never
                     * written; a semaphore's grant is "OK <permits held>" */
                    if (tp_multi ? !multi_reply(line, 0)
                        : tp_sem ? strcmp(line, "OK 1") != 0
                               : (parse_grant(line, &holds) == 0 &&
                                  !(tp_shared && read_grant(line, &holds))) ||
                                     holds != 1)
                        die(EXIT_DAEMON, "%s of connection %d answered: %s",
                            tp_multi ? "MLOCK" : tp_sem ? "ACQUIRE" : tp_shared ? "RLOCK" : "LOCK",
                            c->id, line);
                    c->state = ST_UNLOCK_SENT;
                    send_unlock(c);
                } else if (c->state == ST_UNLOCK_SENT) {
                    if (tp_multi ? !multi_reply(line, 1) : strcmp(line, "OK 0") != 0)
                        die(EXIT_DAEMON, "%s of connection %d answered: %s",
                            tp_multi ? "MUNLOCK" : tp_sem ? "RELEASE" : tp_shared ? "RUNLOCK" : "UNLOCK",
                            c->id, line);
                    all_pairs++;
                    if (now >= t0 && now < t1) {
                        pairs++;
                        samples_add(&lat, now - c->sent_at);
                    }
                    c->state = ST_LOCK_SENT;
                    send_lock(c, now);
                } else {
                    die(EXIT_DAEMON, "unexpected line on connection %d: %s", c->id, line);
                }
            }
        }
    }
    double elapsed = (double)(t1 - t0) / 1e6;
    /* This process's own CPU over the whole run (it shares the machine). */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    /* all_pairs: the whole run, warm-up included, to set against what
     * Redis counted from before this process started to after it ended. */
    printf("pairs_per_sec=%.0f pairs=%lld seconds=%.3f connections=%ld pair_p50_us=%lld "
           "pair_p99_us=%lld events=%lld client_cpu_pct=%.1f all_pairs=%lld\n",
           (double)pairs / elapsed, pairs, elapsed, nc, (long long)pct(lat.v, lat.n, 50),
           (long long)pct(lat.v, lat.n, 99), events_seen,
           100.0 * cpu / ((double)(now_us() - start) / 1e6), all_pairs);
    for (long i = 0; i < nc; i++) conn_close(&cs[i]);
    free(cs);
    free(lat.v);
    return 0;
}

/* ---- blocking ---------------------------------------------------------- */

/* What one process of `blocking` sends back through the result pipe. */
typedef struct {
    long long pairs, all_pairs;
    int64_t us;       /* the measured interval */
    int64_t cpu_us;   /* this process's CPU over it */
    long id;          /* fleet: the process's index */
    long long nsamples; /* fleet: latencies it left in its slot */
} blk_result_t;

static int64_t cpu_self_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static void blk_pair(dlock_t *d, const char *name, long id) {
    uint64_t fence;
    uint32_t holds, left;
    int rc = dlock_lock(d, name, 0, &fence, &holds);
    if (rc != 0) die(EXIT_DAEMON, "process %ld: LOCK %s: %s", id, name, dlock_strerror(rc));
    if (holds != 1) die(EXIT_DAEMON, "process %ld: LOCK %s: %u holds, not 1", id, name, holds);
    rc = dlock_unlock(d, name, &left);
    if (rc != 0) die(EXIT_DAEMON, "process %ld: UNLOCK %s: %s", id, name, dlock_strerror(rc));
    if (left != 0) die(EXIT_DAEMON, "process %ld: UNLOCK %s: %u holds left", id, name, left);
}

/* One process: connects, says ready ('1', or '0' on failure), waits for
 * the start (EOF on go), loops LOCK/UNLOCK b<id> as peers.py does, and
 * writes its blk_result_t. */
static void blk_child(const opts_t *o, long id, int ready_fd, int go_fd, int res_fd) {
    long secs = o->seconds ? o->seconds : 10;
    alarm((unsigned)(o->warmup + secs + 60)); /* a hung daemon must not keep us */
    int err = 0;
    dlock_t *d = dlock_connect(o->sock, &err);
    if (d != NULL) err = dlock_ping(d);
    if (err) {
        fprintf(stderr, "%s: daemon problem: process %ld: %s\n", prog, id, dlock_strerror(err));
        if (write(ready_fd, "0", 1) != 1) _exit(EXIT_LOCAL);
        _exit(EXIT_DAEMON);
    }
    if (write(ready_fd, "1", 1) != 1) _exit(EXIT_LOCAL);
    char c;
    while (read(go_fd, &c, 1) < 0 && errno == EINTR) {
    }
    char name[32];
    snprintf(name, sizeof(name), "b%ld", id);
    blk_result_t r = {0};
    int64_t end = now_us() + o->warmup * 1000000LL;
    while (now_us() < end) {
        blk_pair(d, name, id);
        r.all_pairs++;
    }
    int64_t t0 = now_us(), c0 = cpu_self_us(), now = t0;
    end = t0 + secs * 1000000LL;
    while (now < end) {
        blk_pair(d, name, id);
        r.pairs++;
        now = now_us();
    }
    r.us = now - t0;
    r.cpu_us = cpu_self_us() - c0;
    r.all_pairs += r.pairs;
    dlock_close(d);
    if (write(res_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) _exit(EXIT_LOCAL);
    _exit(0);
}

/* One child of a run: it sets up, writes '1' on ready_fd (or says why on
 * stderr and writes something else), waits for go_fd to close, runs, writes
 * its result on res_fd and _exits. */
typedef void (*child_fn)(void *arg, long id, int ready_fd, int go_fd, int res_fd);

/* The np children each write '1' on ready_fd once set up; then closing go_w
 * starts them all at once. Returns 1 when all are ready; else they are
 * sent SIGTERM. */
static int children_go(long np, const pid_t *pids, int ready_fd, int go_w) {
    int ok = 1;
    for (long i = 0; i < np && ok; i++) {
        char c = '0';
        ssize_t n;
        while ((n = read(ready_fd, &c, 1)) < 0 && errno == EINTR) {
        }
        ok = n == 1 && c == '1';
    }
    if (!ok)
        for (long i = 0; i < np; i++) kill(pids[i], SIGTERM);
    close(go_w); /* start */
    return ok;
}

/* Forks np children running child(arg, i, ...) and starts them together
 * (children_go, whose answer goes in *ok). Their results come on *res_r. */
static pid_t *children_start(long np, child_fn child, void *arg, int *res_r, int *ok) {
    int ready[2], go[2], res[2];
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(res) != 0)
        die(EXIT_LOCAL, "pipe: %s", strerror(errno));
    pid_t *pids = xmalloc((size_t)np * sizeof(*pids));
    fflush(stdout);
    for (long i = 0; i < np; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            int e = errno;
            for (long j = 0; j < i; j++) kill(pids[j], SIGTERM);
            die(EXIT_LOCAL, "fork: %s", strerror(e));
        }
        if (pids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            close(res[0]);
            child(arg, i, ready[1], go[0], res[1]);
        }
    }
    close(ready[1]);
    close(go[0]);
    close(res[1]);
    *ok = children_go(np, pids, ready[0], go[1]);
    close(ready[0]);
    *res_r = res[0];
    return pids;
}

static void blk_run(void *arg, long id, int ready_fd, int go_fd, int res_fd) {
    blk_child(arg, id, ready_fd, go_fd, res_fd);
}

/* -c processes, each with one libdlock connection, looping dlock_lock()
 * and dlock_unlock() on a name of its own, after a common start. The rate
 * is the sum of the processes' rates, as in peers.py. */

static int cmd_blocking(opts_t *o) {
    long np = o->conns ? o->conns : 8;
    if (np > 1024) die(EXIT_USAGE, "blocking: at most 1024 processes");
    int ok, res_r;
    pid_t *pids = children_start(np, blk_run, o, &res_r, &ok);
    long long pairs = 0, all_pairs = 0;
    int64_t cpu_us = 0;
    double rate = 0;
    long got = 0;
    blk_result_t r;
    while (ok && got < np) {
        ssize_t n = read(res_r, &r, sizeof(r));
        if (n < 0 && errno == EINTR) continue;
        if (n != (ssize_t)sizeof(r)) break;
        got++;
        pairs += r.pairs;
        all_pairs += r.all_pairs;
        cpu_us += r.cpu_us;
        if (r.us > 0) rate += (double)r.pairs * 1e6 / (double)r.us;
    }
    close(res_r);
    int code = 0;
    for (long i = 0; i < np; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
        }
        int c = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_DAEMON;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            fprintf(stderr, "%s: daemon problem: process %ld: no reply in time\n", prog, i);
        if (c != 0 && code == 0) code = c;
    }
    free(pids);
    if (!ok) return code ? code : EXIT_DAEMON;
    if (code != 0 || got != np) {
        if (code == 0) fprintf(stderr, "%s: error: %ld of %ld processes reported\n", prog, got, np);
        return code ? code : EXIT_LOCAL;
    }
    printf("pairs_per_sec=%.0f pairs=%lld seconds=%ld procs=%ld all_pairs=%lld "
           "client_cpu_us_per_pair=%.1f\n",
           rate, pairs, o->seconds ? o->seconds : 10, np, all_pairs,
           pairs ? (double)cpu_us / (double)pairs : 0.0);
    return 0;
}

/* ---- fleet ------------------------------------------------------------- */

/* A fleet on one Redis: -N hosts (dlockd sockets PREFIX0.sock ..
 * PREFIX<N-1>.sock), -c client processes per host, each with one libdlock
 * connection to its host's dlockd, looping dlock_lock()/dlock_unlock() of a
 * name drawn at random among -K shared names (fleet:0 .. fleet:<K-1>: many
 * names, little contention; 16, a hot set every host waits on). Each
 * process keeps its pair latencies in a shared mapping; the parent merges
 * them. Output: pairs_per_sec (the sum of the processes' rates), all_pairs
 * (warm-up included), pair_p50_us, pair_p99_us, and grants_min and
 * grants_max, the fewest and the most pairs one process made in the
 * measured interval (how evenly a hot name is shared). */

#define FLEET_HOSTS_MAX 256
#define FLEET_PROCS_MAX 4096
#define FLEET_SAMPLES_MAX (1 << 15) /* per process; later pairs are counted, not sampled */

/* A per-process xorshift64: names drawn without libc's shared state. */
static uint64_t fleet_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void fleet_child(const opts_t *o, long id, const char *sock, int64_t *samples,
                        int ready_fd, int go_fd, int res_fd) {
    long secs = o->seconds ? o->seconds : 10;
    long names = o->names ? o->names : 65536;
    alarm((unsigned)(o->warmup + secs + 60)); /* a hung daemon must not keep us */
    int err = 0;
    dlock_t *d = dlock_connect(sock, &err);
    if (d != NULL) err = dlock_ping(d);
    if (err) {
        fprintf(stderr, "%s: daemon problem: process %ld (%s): %s\n", prog, id, sock,
                dlock_strerror(err));
        if (write(ready_fd, "0", 1) != 1) _exit(EXIT_LOCAL);
        _exit(EXIT_DAEMON);
    }
    if (write(ready_fd, "1", 1) != 1) _exit(EXIT_LOCAL);
    char c;
    while (read(go_fd, &c, 1) < 0 && errno == EINTR) {
    }
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    char name[48];
    blk_result_t r = {.id = id};
    int64_t t0 = now_us() + o->warmup * 1000000LL, end = t0 + secs * 1000000LL;
    int64_t c0 = 0, now = now_us(), started = -1;
    while (now < end) {
        snprintf(name, sizeof(name), "fleet:%llu",
                 (unsigned long long)(fleet_rand(&seed) % (uint64_t)names));
        int64_t sent = now;
        blk_pair(d, name, id);
        now = now_us();
        r.all_pairs++;
        if (sent < t0) continue;
        if (started < 0) {
            started = sent;
            c0 = cpu_self_us();
        }
        if (r.nsamples < FLEET_SAMPLES_MAX) samples[r.nsamples++] = now - sent;
        r.pairs++;
    }
    r.us = started < 0 ? 0 : now - started;
    r.cpu_us = started < 0 ? 0 : cpu_self_us() - c0;
    dlock_close(d);
    if (write(res_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) _exit(EXIT_LOCAL);
    _exit(0);
}

/* What each fleet child needs: its host's socket, its samples. */
typedef struct fleet_ctx_s {
    const opts_t *o;
    char **socks;
    long per;
    int64_t *samples;
} fleet_ctx_t;

static void fleet_run(void *arg, long id, int ready_fd, int go_fd, int res_fd) {
    const fleet_ctx_t *x = arg;
    fleet_child(x->o, id, x->socks[id / x->per], x->samples + (size_t)id * FLEET_SAMPLES_MAX,
                ready_fd, go_fd, res_fd);
}

static int cmd_fleet(opts_t *o) {
    long hosts = o->hosts ? o->hosts : 32, per = o->conns ? o->conns : 8;
    if (hosts < 1 || hosts > FLEET_HOSTS_MAX)
        die(EXIT_USAGE, "fleet: -N takes 1 to %d hosts", FLEET_HOSTS_MAX);
    if (per < 1 || hosts * per > FLEET_PROCS_MAX)
        die(EXIT_USAGE, "fleet: at most %d processes in all (-N x -c)", FLEET_PROCS_MAX);
    long np = hosts * per;
    char **socks = xmalloc((size_t)hosts * sizeof(*socks));
    for (long h = 0; h < hosts; h++) {
        size_t len = strlen(o->sock) + 32;
        socks[h] = xmalloc(len);
        snprintf(socks[h], len, "%s%ld.sock", o->sock, h);
    }
    size_t map_len = (size_t)np * FLEET_SAMPLES_MAX * sizeof(int64_t);
    int64_t *samples = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (samples == MAP_FAILED) die(EXIT_LOCAL, "mmap %zu bytes: %s", map_len, strerror(errno));
    fleet_ctx_t ctx = {.o = o, .socks = socks, .per = per, .samples = samples};
    int ok, res_r;
    pid_t *pids = children_start(np, fleet_run, &ctx, &res_r, &ok);
    long long pairs = 0, all_pairs = 0, gmin = -1, gmax = 0;
    int64_t cpu_us = 0;
    double rate = 0;
    long got = 0;
    size_t *nsamples = xmalloc((size_t)np * sizeof(*nsamples)), nlat = 0;
    memset(nsamples, 0, (size_t)np * sizeof(*nsamples));
    blk_result_t r;
    while (ok && got < np) {
        ssize_t n = read(res_r, &r, sizeof(r));
        if (n < 0 && errno == EINTR) continue;
        if (n != (ssize_t)sizeof(r)) break;
        got++;
        pairs += r.pairs;
        all_pairs += r.all_pairs;
        cpu_us += r.cpu_us;
        if (r.us > 0) rate += (double)r.pairs * 1e6 / (double)r.us;
        if (gmin < 0 || r.pairs < gmin) gmin = r.pairs;
        if (r.pairs > gmax) gmax = r.pairs;
        if (r.id >= 0 && r.id < np && r.nsamples <= FLEET_SAMPLES_MAX) {
            nsamples[r.id] = (size_t)r.nsamples;
            nlat += (size_t)r.nsamples;
        }
    }
    close(res_r);
    int code = 0;
    for (long i = 0; i < np; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
        }
        int c = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_DAEMON;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            fprintf(stderr, "%s: daemon problem: process %ld: no reply in time\n", prog, i);
        if (c != 0 && code == 0) code = c;
    }
    free(pids);
    if (!ok || code != 0 || got != np) {
        if (ok && code == 0) fprintf(stderr, "%s: error: %ld of %ld processes reported\n", prog, got, np);
        munmap(samples, map_len);
        return code ? code : ok ? EXIT_LOCAL : EXIT_DAEMON;
    }
    /* Every process's samples, in one array. */
    int64_t *lat = xmalloc(nlat * sizeof(*lat));
    size_t k = 0;
    for (long i = 0; i < np; i++) {
        memcpy(lat + k, samples + (size_t)i * FLEET_SAMPLES_MAX, nsamples[i] * sizeof(*lat));
        k += nsamples[i];
    }
    qsort(lat, nlat, sizeof(*lat), cmp_i64);
    printf("pairs_per_sec=%.0f pairs=%lld seconds=%ld hosts=%ld procs=%ld all_pairs=%lld "
           "pair_p50_us=%lld pair_p99_us=%lld samples=%zu client_cpu_us_per_pair=%.1f "
           "grants_min=%lld grants_max=%lld\n",
           rate, pairs, o->seconds ? o->seconds : 10, hosts, np, all_pairs,
           (long long)pct(lat, nlat, 50), (long long)pct(lat, nlat, 99), nlat,
           pairs ? (double)cpu_us / (double)pairs : 0.0, gmin, gmax);
    free(lat);
    free(nsamples);
    munmap(samples, map_len);
    for (long h = 0; h < hosts; h++) free(socks[h]);
    free(socks);
    return 0;
}

/* ---- handoff ----------------------------------------------------------- */

static int cmd_handoff(opts_t *o) {
    long rounds = o->rounds ? o->rounds : 1000;
    long warm = 20;
    const char *name = o->name ? o->name : "handoff";
    int cross = o->sock2 != NULL;
    if (cross && o->redis == NULL) die(EXIT_USAGE, "handoff -S needs -R REDIS_SOCK");
    const char *sock_b = cross ? o->sock2 : o->sock;
    conn_t *a = conn_open(o->sock, 1), *b = conn_open(sock_b, 2);
    conn_t *adm_a = conn_open(o->sock, 3), *adm_b = conn_open(sock_b, 4);
    conn_t *redis = o->redis ? conn_open(o->redis, 5) : NULL;
    /* Redisson's channel for the default key_prefix "dlock:". */
    char channel[400];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{dlock:%s}", name);

    char req[300], line[512];
    snprintf(req, sizeof(req), "LOCK %s", name);
    request(a, req, line, sizeof(line));
    if (parse_grant(line, NULL) == 0) die(EXIT_DAEMON, "%s answered: %s", req, line);

    conn_t *holder = a, *waiter = b, *adm_w = adm_b;
    samples_t lat = {0};
    char lock_line[300], unlock_line[300];
    int ll = snprintf(lock_line, sizeof(lock_line), "LOCK %s\n", name);
    int ul = snprintf(unlock_line, sizeof(unlock_line), "UNLOCK %s\n", name);
    unsigned long long last_fence = 0;
    for (long r = 0; r < warm + rounds; r++) {
        if (cross) {
            /* The previous waiter's daemon has dropped its subscription. */
            int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL;
            while (numsub(redis, channel) != 0) {
                if (now_us() > end) die(EXIT_DAEMON, "a subscription to %s stays", channel);
                sleep_us(100);
            }
        }
        sync_send(waiter, lock_line, (size_t)ll);
        wait_info(adm_w, "waiters", 1, 0, REPLY_TIMEOUT_MS, &waiter, 1);
        if (cross) {
            /* Queued is not enough across daemons: wait until the waiter's
             * daemon listens for the release, then for the retry that the
             * subscription confirmation triggers to come back. */
            int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL;
            while (numsub(redis, channel) != 1) {
                if (now_us() > end) die(EXIT_DAEMON, "the waiter's daemon never subscribed to %s", channel);
                sleep_us(100);
            }
            sleep_us(3000);
        }
        conn_read(waiter);
        if (conn_line(waiter, line, sizeof(line)))
            die(EXIT_DAEMON, "the waiter was answered while the lock was held: %s", line);
        int64_t t0 = now_us();
        if (conn_send(holder, unlock_line, (size_t)ul) != 0)
            die(EXIT_LOCAL, "UNLOCK did not fit the socket buffer");
        sync_line(waiter, line, sizeof(line), "the waiting LOCK");
        int64_t t1 = now_us();
        unsigned long long fence = parse_grant(line, NULL);
        if (fence == 0) die(EXIT_DAEMON, "the waiting LOCK answered: %s", line);
        if (fence <= last_fence)
            die(EXIT_DAEMON, "fence went backwards: %llu after %llu", fence, last_fence);
        last_fence = fence;
        sync_line(holder, line, sizeof(line), "UNLOCK");
        if (strcmp(line, "OK 0") != 0) die(EXIT_DAEMON, "UNLOCK answered: %s", line);
        if (r >= warm) samples_add(&lat, t1 - t0);
        conn_t *t = holder;
        holder = waiter;
        waiter = t;
        adm_w = waiter == b ? adm_b : adm_a;
    }
    snprintf(req, sizeof(req), "UNLOCK %s", name);
    request(holder, req, line, sizeof(line));
    if (strcmp(line, "OK 0") != 0) die(EXIT_DAEMON, "the last UNLOCK answered: %s", line);
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    long long sum = 0;
    for (size_t i = 0; i < lat.n; i++) sum += lat.v[i];
    printf("p50_us=%lld p99_us=%lld rounds=%zu mean_us=%lld min_us=%lld max_us=%lld\n",
           (long long)pct(lat.v, lat.n, 50), (long long)pct(lat.v, lat.n, 99), lat.n,
           lat.n ? sum / (long long)lat.n : -1, lat.n ? (long long)lat.v[0] : -1,
           lat.n ? (long long)lat.v[lat.n - 1] : -1);
    conn_close(a);
    conn_close(b);
    conn_close(adm_a);
    conn_close(adm_b);
    if (redis) conn_close(redis);
    free(a), free(b), free(adm_a), free(adm_b), free(redis), free(lat.v);
    return 0;
}

/* ---- fair -------------------------------------------------------------- */

/* A fair lock's hand-off with a long queue: -c connections (100) take
 * turns on one fair lock. The first holds it; the others queue behind it
 * (INFO waiters says when all are in); then -n times the holder sends
 * UNLOCK and FAIRLOCK again (to the queue's tail), and the hand-off is
 * from the UNLOCK written to the next holder's OK read. That next holder
 * must be the one that queued first: a grant out of order ends the run. */
static int cmd_fair(opts_t *o) {
    long nc = o->conns ? o->conns : 100, rounds = o->rounds ? o->rounds : 1000;
    const char *name = o->name ? o->name : "fair";
    if (nc < 2) die(EXIT_USAGE, "fair needs -c 2 or more");
    raise_nofile((size_t)nc + 16);
    conn_t **cs = xmalloc((size_t)nc * sizeof(*cs));
    conn_t *adm = conn_open(o->sock, (int)nc);
    char lock_line[300], unlock_line[300], line[512];
    int ll = snprintf(lock_line, sizeof(lock_line), "FAIRLOCK %s\n", name);
    int ul = snprintf(unlock_line, sizeof(unlock_line), "UNLOCK %s\n", name);
    /* order[]: the connections in the order they queued; order[0] holds. */
    long *order = xmalloc((size_t)nc * sizeof(*order));
    for (long i = 0; i < nc; i++) {
        cs[i] = conn_open(o->sock, (int)i);
        order[i] = i;
        sync_send(cs[i], lock_line, (size_t)ll);
        if (i == 0) {
            sync_line(cs[0], line, sizeof(line), "the first FAIRLOCK");
            if (parse_grant(line, NULL) == 0) die(EXIT_DAEMON, "FAIRLOCK answered: %s", line);
        } else {
            /* one at a time, so that the queue's order is known */
            wait_info(adm, "waiters", i, 0, REPLY_TIMEOUT_MS, NULL, 0);
        }
    }
    struct pollfd *pf = xmalloc((size_t)nc * sizeof(*pf));
    samples_t lat = {0};
    unsigned long long last_fence = 0;
    long warm = o->warmup > 0 ? 10 : 0;
    for (long r = 0; r < warm + rounds; r++) {
        conn_t *holder = cs[order[0]], *next = cs[order[1]];
        int64_t t0 = now_us();
        if (conn_send(holder, unlock_line, (size_t)ul) != 0)
            die(EXIT_LOCAL, "UNLOCK did not fit the socket buffer");
        /* the first grant to come, from whichever connection */
        conn_t *got = NULL;
        int64_t end = t0 + REPLY_TIMEOUT_MS * 1000LL;
        while (got == NULL) {
            for (long i = 0; i < nc; i++) pf[i] = (struct pollfd){.fd = cs[i]->fd, .events = POLLIN};
            int64_t left = (end - now_us()) / 1000;
            if (left <= 0) die(EXIT_DAEMON, "no grant within %d ms of an UNLOCK", REPLY_TIMEOUT_MS);
            if (poll(pf, (nfds_t)nc, (int)left) <= 0) continue;
            for (long i = 0; i < nc && got == NULL; i++) {
                if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)) || cs[i] == holder) continue;
                conn_read(cs[i]);
                if (conn_line(cs[i], line, sizeof(line))) got = cs[i];
            }
        }
        int64_t t1 = now_us();
        if (got != next)
            die(EXIT_DAEMON, "out of order: connection %d was granted, %d queued first", got->id,
                next->id);
        unsigned long long fence = parse_grant(line, NULL);
        if (fence == 0 || fence <= last_fence)
            die(EXIT_DAEMON, "the next holder's FAIRLOCK answered: %s (after fence %llu)", line,
                last_fence);
        last_fence = fence;
        sync_line(holder, line, sizeof(line), "UNLOCK");
        if (strcmp(line, "OK 0") != 0) die(EXIT_DAEMON, "UNLOCK answered: %s", line);
        if (r >= warm) samples_add(&lat, t1 - t0);
        /* the old holder queues again, last */
        sync_send(holder, lock_line, (size_t)ll);
        long h = order[0];
        memmove(order, order + 1, (size_t)(nc - 1) * sizeof(*order));
        order[nc - 1] = h;
        wait_info(adm, "waiters", nc - 1, 0, REPLY_TIMEOUT_MS, NULL, 0);
    }
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    printf("p50_us=%lld p99_us=%lld rounds=%zu waiters=%ld min_us=%lld max_us=%lld\n",
           (long long)pct(lat.v, lat.n, 50), (long long)pct(lat.v, lat.n, 99), lat.n, nc - 1,
           lat.n ? (long long)lat.v[0] : -1, lat.n ? (long long)lat.v[lat.n - 1] : -1);
    for (long i = 0; i < nc; i++) {
        conn_close(cs[i]);
        free(cs[i]);
    }
    conn_close(adm);
    free(adm), free(cs), free(order), free(pf), free(lat.v);
    return 0;
}

/* ---- scale ------------------------------------------------------------- */

static int cmd_scale(opts_t *o) {
    long nc = o->conns ? o->conns : 10000;
    long nl = o->locks ? o->locks : 10;
    long hold = o->hold ? o->hold : 40;
    raise_nofile((size_t)nc + 32);
    ep_init();
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    conn_t *cs = xmalloc((size_t)nc * sizeof(*cs));
    int64_t t_start = now_us();
    for (long i = 0; i < nc; i++) {
        conn_init(&cs[i], unix_connect(o->sock, REPLY_TIMEOUT_MS, 1), (int)i);
        ep_add(&cs[i]);
    }
    int64_t t_conn = now_us();
    /* Each connection asks for its locks at once (pipelined). */
    char *buf = xmalloc((size_t)nl * 40);
    for (long i = 0; i < nc; i++) {
        size_t len = 0;
        for (long j = 0; j < nl; j++)
            len += (size_t)sprintf(buf + len, "LOCK s%ld_%ld\n", i, j);
        cs[i].state = ST_LOCK_SENT;
        ep_send(&cs[i], buf, len);
    }
    free(buf);
    long long want = (long long)nc * nl, granted = 0;
    struct epoll_event evs[512];
    char line[512];
    int64_t last_progress = now_us();
    int ready = 0;
    int64_t t_ready = 0, hold_end = 0;
    while (!got_signal) {
        int64_t now = now_us();
        if (ready && now >= hold_end) break;
        if (!ready && now - last_progress > STALL_US)
            die(EXIT_DAEMON, "scale: %lld of %lld locks granted, then nothing for %lld s", granted,
                want, (long long)(STALL_US / 1000000));
        int n = epoll_wait(ep, evs, 512, 100);
        if (n < 0 && errno != EINTR) die(EXIT_LOCAL, "epoll_wait: %s", strerror(errno));
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            if (evs[e].events & EPOLLOUT) ep_writable(c);
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            conn_read(c);
            while (conn_line(c, line, sizeof(line))) {
                long holds = 0;
                if (c->granted >= nl || parse_grant(line, &holds) == 0 || holds != 1)
                    die(EXIT_DAEMON, "connection %d: LOCK s%d_%d answered: %s", c->id, c->id,
                        c->granted, line);
                c->granted++;
                granted++;
                last_progress = now_us();
            }
        }
        if (!ready && granted == want) {
            ready = 1;
            t_ready = now_us();
            hold_end = t_ready + hold * 1000000LL;
            printf("ready locks=%lld connections=%ld connect_s=%.3f grant_s=%.3f\n", granted, nc,
                   (double)(t_conn - t_start) / 1e6, (double)(t_ready - t_conn) / 1e6);
            fflush(stdout);
        }
    }
    if (!ready)
        die(EXIT_DAEMON, "scale: stopped before all locks were granted (%lld of %lld)", granted,
            want);
    double held = (double)(now_us() - t_ready) / 1e6;
    for (long i = 0; i < nc; i++) conn_close(&cs[i]);
    free(cs);
    printf("done held_s=%.1f lost_events=%lld\n", held, events_seen);
    return 0;
}

/* ---- herd -------------------------------------------------------------- */

static int cmd_herd(opts_t *o) {
    long nc = o->conns ? o->conns : 1000;
    const char *name = o->name ? o->name : "herd";
    raise_nofile((size_t)nc + 32);
    ep_init();
    conn_t *holder = conn_open(o->sock, -1), *admin = conn_open(o->sock, -2);
    conn_t *redis = o->redis ? conn_open(o->redis, -3) : NULL;
    char req[300], line[512];
    snprintf(req, sizeof(req), "LOCK %s", name);
    request(holder, req, line, sizeof(line));
    if (parse_grant(line, NULL) == 0) die(EXIT_DAEMON, "%s answered: %s", req, line);

    char lock_line[300], unlock_line[300];
    int ll = snprintf(lock_line, sizeof(lock_line), "LOCK %s\n", name);
    int ul = snprintf(unlock_line, sizeof(unlock_line), "UNLOCK %s\n", name);
    conn_t *cs = xmalloc((size_t)nc * sizeof(*cs));
    for (long i = 0; i < nc; i++) {
        conn_init(&cs[i], unix_connect(o->sock, REPLY_TIMEOUT_MS, 1), (int)i);
        ep_add(&cs[i]);
        cs[i].state = ST_LOCK_SENT;
        ep_send(&cs[i], lock_line, (size_t)ll);
    }
    /* All queued in the daemon, none answered. */
    {
        char info[2048];
        int64_t end = now_us() + 30 * 1000000LL;
        int64_t pause = 100;
        for (;;) {
            long long w = daemon_info(admin, "waiters", info, sizeof(info));
            struct epoll_event evs[64];
            int n = epoll_wait(ep, evs, 64, 0);
            for (int e = 0; e < n; e++) {
                conn_t *c = evs[e].data.ptr;
                if (evs[e].events & EPOLLOUT) ep_writable(c);
                if (!(evs[e].events & EPOLLIN)) continue;
                conn_read(c);
                if (conn_line(c, line, sizeof(line)))
                    die(EXIT_DAEMON, "a waiting LOCK was answered while the lock was held: %s",
                        line);
            }
            if (w == nc) break;
            if (now_us() > end) die(EXIT_DAEMON, "herd: waiters=%lld, expected %ld", w, nc);
            sleep_us(pause);
            if (pause < 5000) pause *= 2;
        }
    }
    char *before = redis ? redis_info(redis, "everything") : NULL;

    int64_t t0 = now_us();
    if (conn_send(holder, unlock_line, (size_t)ul) != 0) die(EXIT_LOCAL, "UNLOCK did not fit");
    long done = 0, oks = 0;
    int64_t last_ok = 0, first_ok = 0, last_progress = t0;
    unsigned long long *fences = xmalloc((size_t)nc * sizeof(*fences));
    struct epoll_event evs[256];
    while (done < nc) {
        int64_t now = now_us();
        if (now - last_progress > STALL_US)
            die(EXIT_DAEMON, "herd: %ld of %ld clients got the lock, then nothing for %lld s", oks,
                nc, (long long)(STALL_US / 1000000));
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno != EINTR) die(EXIT_LOCAL, "epoll_wait: %s", strerror(errno));
        now = now_us();
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            if (evs[e].events & EPOLLOUT) ep_writable(c);
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            conn_read(c);
            while (conn_line(c, line, sizeof(line))) {
                last_progress = now;
                if (c->state == ST_LOCK_SENT) {
                    unsigned long long f = parse_grant(line, NULL);
                    if (f == 0) die(EXIT_DAEMON, "herd client %d: LOCK answered: %s", c->id, line);
                    fences[oks++] = f;
                    if (first_ok == 0) first_ok = now;
                    last_ok = now;
                    c->state = ST_UNLOCK_SENT;
                    ep_send(c, unlock_line, (size_t)ul);
                } else if (c->state == ST_UNLOCK_SENT) {
                    if (strcmp(line, "OK 0") != 0)
                        die(EXIT_DAEMON, "herd client %d: UNLOCK answered: %s", c->id, line);
                    c->state = ST_DONE;
                    done++;
                } else {
                    die(EXIT_DAEMON, "herd client %d: unexpected line: %s", c->id, line);
                }
            }
        }
    }
    sync_line(holder, line, sizeof(line), "the holder's UNLOCK");
    if (strcmp(line, "OK 0") != 0) die(EXIT_DAEMON, "the holder's UNLOCK answered: %s", line);
    /* Every grant must carry its own fence. */
    qsort(fences, (size_t)oks, sizeof(*fences), cmp_u64);
    for (long i = 1; i < oks; i++)
        if (fences[i] == fences[i - 1])
            die(EXIT_DAEMON, "herd: two grants carried the same fence %llu", fences[i]);
    free(fences);

    printf("herd_ms=%.1f clients=%ld first_ok_ms=%.2f", (double)(last_ok - t0) / 1000.0, nc,
           (double)(first_ok - t0) / 1000.0);
    if (redis) {
        /* Let the last release (and any unsubscribe) reach Redis. */
        sleep_us(300000);
        char *after = redis_info(redis, "everything");
        cmdstat_t sb[256], sa[256];
        size_t nb = parse_cmdstats(before, sb, 256), na = parse_cmdstats(after, sa, 256);
        /* Redis counts a command when it has run: the first INFO shows up in
         * the second reading, the second one in neither. */
        long long total = info_field(after, "total_commands_processed") -
                          info_field(before, "total_commands_processed") - 1;
        /* Commands dlockd's scripts run inside Redis (redis.call): Redis
         * counts them too, but they are not round trips. */
        static const char *const inner[] = {"hget", "hincrby", "pexpire", "exists", "hset",
                                            "time", "set", "incr", "pttl", "del",
                                            "publish", "hexists", "get", "hkeys", "getset",
                                            "hmget", NULL};
        long long inner_sum = 0, info_calls = 0;
        printf(" redis_total_commands=%lld", total);
        for (size_t i = 0; i < na; i++) {
            long long d = sa[i].calls - cmdstat_calls(sb, nb, sa[i].name);
            if (d == 0) continue;
            if (strcmp(sa[i].name, "info") == 0) {
                info_calls = d;
                continue;
            }
            printf(" redis_%s=%lld", sa[i].name, d);
            for (int k = 0; inner[k]; k++)
                if (strcmp(sa[i].name, inner[k]) == 0) inner_sum += d;
        }
        (void)info_calls;
        printf(" redis_sent_commands=%lld", total - inner_sum);
        free(before);
        free(after);
        conn_close(redis);
        free(redis);
    }
    printf("\n");
    for (long i = 0; i < nc; i++) conn_close(&cs[i]);
    free(cs);
    conn_close(holder);
    conn_close(admin);
    free(holder);
    free(admin);
    return 0;
}

/* ---- live restore: the pause of a hand-over ---------------------------- */

/* Issue 39's row: -c connections each holding -l locks (u<i>_<j>,
 * pipelined as in scale), -n more each waiting for one of them (LOCK
 * u<k>_0, held by connection k), and -p probes looping LOCK/UNLOCK pairs
 * of a name of their own, every request timed. After -w seconds of that,
 * SIGUSR2 to the daemon (INFO's pid); an admin connection asks INFO every
 * UP_INFO_EVERY_US until upgrades or upgrade_failures went up (handed_over
 * says which: a failed hand-over must have changed nothing, so the rest
 * runs the same), and the probes go on -w seconds more. The pause is the
 * longest probe request in progress at some moment between the signal and
 * the INFO that said it was done. Then what must have survived it: each
 * holder's STATUS of u<i>_0 answers OK MINE with the fence it was
 * granted; INFO's locks_held and waiters; each waiter is granted, with a
 * greater fence, once its holder UNLOCKs. A connection the daemon closes
 * ends the run (exit 3). */

#define UP_INFO_EVERY_US 10000
#define UP_TIMEOUT_MS 30000 /* the signal -> the hand-over's end, at most (-t) */

enum { UP_GRANT, UP_QUEUE, UP_MEASURE, UP_STATUS, UP_RELEASE };

typedef struct {
    long nc, nl, nw, np;
    conn_t *hold, *wait, *probe, adm;
    unsigned long long *fence0; /* holder i's fence of u<i>_0 */
    int phase;
    long long granted;       /* UP_GRANT: holds granted */
    int64_t last_progress;
    /* UP_MEASURE */
    samples_t sent, lat;     /* every probe request: when it went, how long it took */
    int stopping;            /* probes: UNLOCK what they hold and stop */
    long probes_done;
    int info_out;            /* an INFO is in flight on adm */
    int64_t next_info;
    char info[4096];         /* the last INFO answered */
    int info_new;
    /* UP_STATUS, UP_RELEASE */
    long status_ok, status_bad, unlocks_ok, waiters_ok, answers;
    char first_bad[512];
} up_t;

/* Keeps the first wrong answer of the checks after the hand-over. */
__attribute__((format(printf, 2, 3))) static void up_bad(up_t *u, const char *fmt, ...) {
    va_list ap;
    if (u->first_bad[0] != '\0') return;
    va_start(ap, fmt);
    vsnprintf(u->first_bad, sizeof(u->first_bad), fmt, ap);
    va_end(ap);
}

static void up_probe_send(conn_t *c, int lock) {
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%s p%d\n", lock ? "LOCK" : "UNLOCK", c->id);
    c->state = lock ? ST_LOCK_SENT : ST_UNLOCK_SENT;
    c->sent_at = now_us();
    ep_send(c, buf, (size_t)n);
}

static void up_probe_line(up_t *u, conn_t *c, const char *line, int64_t now) {
    if (c->state == ST_LOCK_SENT) {
        if (parse_grant(line, NULL) == 0) die(EXIT_DAEMON, "probe %d: LOCK answered: %s", c->id, line);
    } else if (c->state != ST_UNLOCK_SENT || strcmp(line, "OK 0") != 0) {
        die(EXIT_DAEMON, "probe %d: unexpected reply: %s", c->id, line);
    }
    samples_add(&u->sent, c->sent_at);
    samples_add(&u->lat, now - c->sent_at);
    if (c->state == ST_UNLOCK_SENT && u->stopping) {
        c->state = ST_DONE;
        u->probes_done++;
        return;
    }
    up_probe_send(c, c->state == ST_UNLOCK_SENT);
}

static void up_holder_line(up_t *u, conn_t *c, const char *line) {
    long i = c->id, holds = 0;
    unsigned long long f, fence;
    long long ttl;
    char extra;
    switch (u->phase) {
    case UP_GRANT:
        f = parse_grant(line, &holds);
        if (c->granted >= u->nl || f == 0 || holds != 1)
            die(EXIT_DAEMON, "connection %ld: LOCK u%ld_%d answered: %s", i, i, c->granted, line);
        if (c->granted == 0) u->fence0[i] = f;
        c->granted++;
        u->granted++;
        u->last_progress = now_us();
        return;
    case UP_STATUS:
        u->answers++;
        if (sscanf(line, "OK MINE %ld %lld %llu%c", &holds, &ttl, &fence, &extra) == 3 &&
            holds == 1 && fence == u->fence0[i]) {
            u->status_ok++;
        } else {
            u->status_bad++;
            up_bad(u, "holder %ld: STATUS u%ld_0 answered '%.300s', its grant's fence %llu", i, i,
                   line, u->fence0[i]);
        }
        return;
    case UP_RELEASE:
        u->answers++;
        if (strcmp(line, "OK 0") == 0) u->unlocks_ok++;
        else up_bad(u, "holder %ld: UNLOCK u%ld_0 answered '%.300s'", i, i, line);
        return;
    default:
        die(EXIT_DAEMON, "holder %ld: a reply nobody asked for: %s", i, line);
    }
}

static void up_waiter_line(up_t *u, conn_t *c, const char *line) {
    long k = c->id - u->nc, holds = 0;
    unsigned long long f = parse_grant(line, &holds);
    if (u->phase != UP_RELEASE)
        die(EXIT_DAEMON, "waiter %ld: answered while its lock was held: %s", k, line);
    u->answers++;
    if (f > u->fence0[k] && holds == 1) u->waiters_ok++;
    else up_bad(u, "waiter %ld: LOCK u%ld_0 answered '%.300s', its holder's fence %llu", k, k,
                line, u->fence0[k]);
}

static void up_admin_line(up_t *u, const char *line) {
    snprintf(u->info, sizeof(u->info), "%s", line);
    u->info_out = 0;
    u->info_new = 1;
}

/* One round of epoll: reads every ready connection and hands its lines on. */
static void up_pump(up_t *u, int timeout_ms) {
    struct epoll_event evs[512];
    char line[4096];
    int n = epoll_wait(ep, evs, 512, timeout_ms);
    if (n < 0 && errno != EINTR) die(EXIT_LOCAL, "epoll_wait: %s", strerror(errno));
    int64_t now = now_us();
    for (int e = 0; e < n; e++) {
        conn_t *c = evs[e].data.ptr;
        if (evs[e].events & EPOLLOUT) ep_writable(c);
        if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
        conn_read(c);
        while (conn_line(c, line, sizeof(line))) {
            if (c == &u->adm) up_admin_line(u, line);
            else if (c->id < u->nc) up_holder_line(u, c, line);
            else if (c->id < u->nc + u->nw) up_waiter_line(u, c, line);
            else up_probe_line(u, c, line, now);
        }
    }
}

/* A blocking INFO on adm (not in epoll then): its value of key, or die. */
static long long up_info(up_t *u, const char *key) {
    return daemon_info(&u->adm, key, u->info, sizeof(u->info));
}

/* Pumps until the holders' or waiters' answers reach want (or stall). */
static void up_answers(up_t *u, long want, const char *what) {
    int64_t last = now_us();
    long seen = u->answers;
    while (u->answers < want) {
        up_pump(u, 100);
        if (u->answers != seen) seen = u->answers, last = now_us();
        if (now_us() - last > STALL_US)
            die(EXIT_DAEMON, "%s: %ld of %ld answered, then nothing for %lld s", what, u->answers,
                want, (long long)(STALL_US / 1000000));
    }
}

static void up_connect(conn_t *c, const char *sock, int id) {
    conn_init(c, unix_connect(sock, REPLY_TIMEOUT_MS, 1), id);
    ep_add(c);
}

static int cmd_upgrade(opts_t *o) {
    up_t u;
    memset(&u, 0, sizeof(u));
    u.nc = o->conns ? o->conns : 10000;
    u.nl = o->locks ? o->locks : 10;
    u.nw = o->rounds ? o->rounds : 1000;
    u.np = o->permits ? o->permits : 4;
    long window = o->warmup;
    long timeout_ms = o->timeout_ms ? o->timeout_ms : UP_TIMEOUT_MS;
    if (u.nw > u.nc) die(EXIT_USAGE, "-n waiters (%ld) wait for -c holders' locks: at most %ld",
                         u.nw, u.nc);
    raise_nofile((size_t)(u.nc + u.nw + u.np) + 32);
    ep_init();
    char buf[4096];

    /* Holders: every lock asked for at once. */
    u.hold = xmalloc((size_t)u.nc * sizeof(*u.hold));
    u.fence0 = xmalloc((size_t)u.nc * sizeof(*u.fence0));
    int64_t t0 = now_us();
    for (long i = 0; i < u.nc; i++) up_connect(&u.hold[i], o->sock, (int)i);
    int64_t t_conn = now_us();
    for (long i = 0; i < u.nc; i++) {
        size_t len = 0;
        for (long j = 0; j < u.nl && len + 40 < sizeof(buf); j++)
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "LOCK u%ld_%ld\n", i, j);
        ep_send(&u.hold[i], buf, len);
    }
    u.phase = UP_GRANT;
    u.last_progress = now_us();
    long long want = (long long)u.nc * u.nl;
    while (u.granted < want) {
        up_pump(&u, 100);
        if (now_us() - u.last_progress > STALL_US)
            die(EXIT_DAEMON, "%lld of %lld locks granted, then nothing for %lld s", u.granted, want,
                (long long)(STALL_US / 1000000));
    }
    int64_t t_granted = now_us();

    /* Waiters: one LOCK each on a held name, all queued in the daemon. */
    u.phase = UP_QUEUE;
    conn_init(&u.adm, unix_connect(o->sock, REPLY_TIMEOUT_MS, 1), -1);
    u.wait = xmalloc((size_t)u.nw * sizeof(*u.wait));
    for (long k = 0; k < u.nw; k++) {
        up_connect(&u.wait[k], o->sock, (int)(u.nc + k));
        int n = snprintf(buf, sizeof(buf), "LOCK u%ld_0\n", k);
        ep_send(&u.wait[k], buf, (size_t)n);
    }
    int64_t end = now_us() + REPLY_TIMEOUT_MS * 1000LL * 3;
    for (int64_t pause = 1000;; pause = pause < 50000 ? pause * 2 : pause) {
        long long w = up_info(&u, "waiters");
        if (w == u.nw) break;
        if (now_us() > end) die(EXIT_DAEMON, "INFO waiters=%lld, expected %ld", w, u.nw);
        up_pump(&u, (int)(pause / 1000));
    }
    long long pid = up_info(&u, "pid");
    long long upgrades0 = info_value(u.info, "upgrades");
    long long failures0 = info_value(u.info, "upgrade_failures");
    if (upgrades0 < 0 || failures0 < 0) die(EXIT_DAEMON, "INFO has no upgrades or upgrade_failures: %s", u.info);
    long long held0 = info_value(u.info, "locks_held");

    /* Probes, then the signal, then as long again. */
    u.phase = UP_MEASURE;
    u.probe = xmalloc((size_t)u.np * sizeof(*u.probe));
    for (long k = 0; k < u.np; k++) {
        up_connect(&u.probe[k], o->sock, (int)(u.nc + u.nw + k));
        up_probe_send(&u.probe[k], 1);
    }
    ep_add(&u.adm);
    int64_t t_sig = now_us() + window * 1000000LL, t_done = 0;
    int signalled = 0, handed_over = 0;
    while (!signalled || t_done == 0 || now_us() < t_done + window * 1000000LL) {
        int64_t now = now_us();
        if (!signalled && now >= t_sig) {
            if (kill((pid_t)pid, SIGUSR2) != 0)
                die(EXIT_LOCAL, "kill(%lld, SIGUSR2): %s", pid, strerror(errno));
            t_sig = now_us();
            signalled = 1;
            u.next_info = t_sig;
        }
        if (signalled && t_done == 0 && !u.info_out && now >= u.next_info) {
            u.info_out = 1;
            u.next_info = now + UP_INFO_EVERY_US;
            ep_send(&u.adm, "INFO\n", 5);
        }
        if (signalled && t_done == 0 && now - t_sig > timeout_ms * 1000LL)
            die(EXIT_DAEMON, "upgrades stayed at %lld for %ld ms after SIGUSR2 to pid %lld: %s",
                upgrades0, timeout_ms, pid, u.info);
        up_pump(&u, 2);
        if (u.info_new) {
            u.info_new = 0;
            handed_over = info_value(u.info, "upgrades") > upgrades0;
            if (handed_over || info_value(u.info, "upgrade_failures") > failures0) t_done = now_us();
        }
    }
    u.stopping = 1;
    for (int64_t stop = now_us(); u.probes_done < u.np;) {
        up_pump(&u, 100);
        if (now_us() - stop > STALL_US)
            die(EXIT_DAEMON, "%ld of %ld probes answered their last request", u.probes_done, u.np);
    }
    epoll_ctl(ep, EPOLL_CTL_DEL, u.adm.fd, NULL);
    while (u.info_out) { /* an INFO sent after the one that said done */
        sync_line(&u.adm, u.info, sizeof(u.info), "INFO");
        u.info_out = 0;
    }

    /* The pause, and the probes' figures before and after. */
    int64_t pause = 0, after = 0;
    long in_window = 0;
    samples_t base = {0};
    for (size_t k = 0; k < u.lat.n; k++) {
        int64_t s = u.sent.v[k], l = u.lat.v[k];
        if (s + l < t_sig) samples_add(&base, l);
        else if (s <= t_done) pause = l > pause ? l : pause, in_window++;
        else after = l > after ? l : after;
    }
    qsort(base.v, base.n, sizeof(*base.v), cmp_i64);

    /* What survived: INFO, each hold's fence, each waiter. */
    long long new_pid = up_info(&u, "pid");
    long long held = info_value(u.info, "locks_held"), waiters = info_value(u.info, "waiters");
    long long conns = info_value(u.info, "connections");
    long long up_ms = info_value(u.info, "upgrade_ms");
    long long up_bytes = info_value(u.info, "upgrade_state_bytes");
    long long upgrades = info_value(u.info, "upgrades");
    long long failures = info_value(u.info, "upgrade_failures");
    u.phase = UP_STATUS;
    u.answers = 0;
    for (long i = 0; i < u.nc; i++) {
        int n = snprintf(buf, sizeof(buf), "STATUS u%ld_0\n", i);
        ep_send(&u.hold[i], buf, (size_t)n);
    }
    up_answers(&u, u.nc, "STATUS of each holder's first lock");
    u.phase = UP_RELEASE;
    u.answers = 0;
    for (long k = 0; k < u.nw; k++) {
        int n = snprintf(buf, sizeof(buf), "UNLOCK u%ld_0\n", k);
        ep_send(&u.hold[k], buf, (size_t)n);
    }
    up_answers(&u, 2 * u.nw, "the waiters' holders' UNLOCKs and the waiters' grants");
    if (u.first_bad[0]) fprintf(stderr, "%s: first wrong answer: %s\n", prog, u.first_bad);

    printf("handed_over=%d upgrade_failures=%lld pause_ms=%.1f handover_seen_ms=%.1f upgrade_ms=%lld upgrade_state_bytes=%lld "
           "base_p50_ms=%.2f base_p99_ms=%.2f base_max_ms=%.2f after_max_ms=%.2f "
           "window_requests=%ld probe_requests=%zu old_pid=%lld new_pid=%lld upgrades=%lld "
           "connect_s=%.3f grant_s=%.3f locks_held_before=%lld locks_held=%lld waiters=%lld "
           "connections=%lld holders=%ld status_ok=%ld unlocks_ok=%ld waiters_granted=%ld "
           "lost_events=%lld\n",
           handed_over, failures, (double)pause / 1000.0, (double)(t_done - t_sig) / 1000.0, up_ms,
           up_bytes,
           (double)pct(base.v, base.n, 50) / 1000.0, (double)pct(base.v, base.n, 99) / 1000.0,
           base.n ? (double)base.v[base.n - 1] / 1000.0 : -1.0, (double)after / 1000.0, in_window,
           u.lat.n, pid, new_pid, upgrades, (double)(t_conn - t0) / 1e6,
           (double)(t_granted - t_conn) / 1e6, held0, held, waiters, conns, u.nc, u.status_ok,
           u.unlocks_ok, u.waiters_ok, events_seen);
    for (long i = 0; i < u.nc; i++) conn_close(&u.hold[i]);
    for (long k = 0; k < u.nw; k++) conn_close(&u.wait[k]);
    for (long k = 0; k < u.np; k++) conn_close(&u.probe[k]);
    conn_close(&u.adm);
    free(u.hold), free(u.wait), free(u.probe), free(u.fence0);
    free(u.sent.v), free(u.lat.v), free(base.v);
    return 0;
}

/* ---- tagged requests: many on one connection -------------------------- */

/* Splits a tagged reply "#<tag> <rest>": the tag's characters go to tag
 * (NUL-ended), *rest to what follows the space. 0 if line is not one. */
static int split_tagged(const char *line, char *tag, size_t cap, const char **rest) {
    if (line[0] != '#') return 0;
    const char *sp = strchr(line, ' ');
    size_t len = sp ? (size_t)(sp - line - 1) : 0;
    if (sp == NULL || len == 0 || len >= cap) return 0;
    memcpy(tag, line + 1, len);
    tag[len] = '\0';
    *rest = sp + 1;
    return 1;
}

/* The loop or name index a tag "<letter><i>" carries, or -1. */
static long tag_index(const char *tag, char letter, long n) {
    char *end;
    if (tag[0] != letter || tag[1] < '0' || tag[1] > '9') return -1;
    long i = strtol(tag + 1, &end, 10);
    return *end == '\0' && i >= 0 && i < n ? i : -1;
}

/* The shuffle's generator (splitmix64): the same seed gives the same order
 * on every machine, so a run's order can be replayed with -r. */
static uint64_t mix_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* hol: no head-of-line blocking. Connection A holds -c names (100, named
 * -k <prefix><i>, default "hol"); ONE connection B asks for all of them at
 * once, "#n<i> LOCK <prefix><i>", each a tag of its own. When INFO says all
 * of them wait, A releases the names one at a time in a random order
 * (seeded by -r, else by the clock; the seed is printed), and a sample is
 * from A's UNLOCK written to B's "#n<i> OK" read. The next release waits
 * for that grant. B's first reply after a release must be the grant of
 * the released name; any other tag answered, or any reply on B before its
 * name is released, ends the run (exit 3): a wait stuck behind another, or
 * a grant out of turn. -n rounds (10) are counted after -w (1) of warm-up;
 * after each round B gives back what it got and A takes all again. */
static int cmd_hol(opts_t *o) {
    long nn = o->conns ? o->conns : 100, rounds = o->rounds ? o->rounds : 10;
    long warm = o->warmup;
    const char *prefix = o->name ? o->name : "hol";
    /* a seed -r takes back: a non-negative long */
    uint64_t seed = (uint64_t)o->seed;
    if (!o->has_seed) seed = ((uint64_t)now_us() ^ (uint64_t)getpid() << 40) & (uint64_t)LONG_MAX;
    if (nn < 1 || nn > 1000) die(EXIT_USAGE, "hol: -c is 1 to 1000 names");
    if (strlen(prefix) > 200) die(EXIT_USAGE, "hol: -k prefix too long");
    conn_t *a = conn_open(o->sock, 1), *b = conn_open(o->sock, 2), *adm = conn_open(o->sock, 3);
    /* the whole batch of one kind of request, written at once */
    size_t cap = (size_t)nn * 240;
    char *batch = xmalloc(cap), line[512], tag[32];
    long *order = xmalloc((size_t)nn * sizeof(*order));
    samples_t lat = {0};
    uint64_t rng = seed;
    for (long r = 0; r < warm + rounds; r++) {
        /* A takes every name: untagged, answered in order. */
        size_t len = 0;
        for (long i = 0; i < nn; i++)
            len += (size_t)snprintf(batch + len, cap - len, "LOCK %s%ld\n", prefix, i);
        sync_send(a, batch, len);
        for (long i = 0; i < nn; i++) {
            long holds = 0;
            sync_line(a, line, sizeof(line), "the holder's LOCK");
            if (parse_grant(line, &holds) == 0 || holds != 1)
                die(EXIT_DAEMON, "the holder's LOCK %s%ld answered: %s", prefix, i, line);
        }
        /* B asks for all of them, each with a tag of its own. */
        len = 0;
        for (long i = 0; i < nn; i++)
            len += (size_t)snprintf(batch + len, cap - len, "#n%ld LOCK %s%ld\n", i, prefix, i);
        sync_send(b, batch, len);
        wait_info(adm, "waiters", nn, 0, REPLY_TIMEOUT_MS, &b, 1);
        for (long i = 0; i < nn; i++) order[i] = i;
        for (long i = nn - 1; i > 0; i--) {
            long j = (long)(mix_next(&rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (long k = 0; k < nn; k++) {
            long i = order[k];
            conn_read(b);
            if (conn_line(b, line, sizeof(line)))
                die(EXIT_DAEMON, "round %ld: B was answered '%s' before %s%ld was released (%ld "
                    "released so far, seed %llu)", r, line, prefix, i, k, (unsigned long long)seed);
            int n = snprintf(batch, cap, "UNLOCK %s%ld\n", prefix, i);
            int64_t t0 = now_us();
            if (conn_send(a, batch, (size_t)n) != 0)
                die(EXIT_LOCAL, "UNLOCK did not fit the socket buffer");
            sync_line(b, line, sizeof(line), "the waiting tagged LOCK");
            int64_t t1 = now_us();
            const char *rest = NULL;
            long holds = 0;
            if (!split_tagged(line, tag, sizeof(tag), &rest) || tag_index(tag, 'n', nn) != i ||
                parse_grant(rest, &holds) == 0 || holds != 1)
                die(EXIT_DAEMON, "round %ld: %s%ld released, and B's first reply was '%s', not "
                    "#n%ld's grant (seed %llu)", r, prefix, i, line, i, (unsigned long long)seed);
            sync_line(a, line, sizeof(line), "the holder's UNLOCK");
            if (strcmp(line, "OK 0") != 0)
                die(EXIT_DAEMON, "the holder's UNLOCK answered: %s", line);
            if (r >= warm) samples_add(&lat, t1 - t0);
        }
        /* B gives every name back, untagged. */
        len = 0;
        for (long i = 0; i < nn; i++)
            len += (size_t)snprintf(batch + len, cap - len, "UNLOCK %s%ld\n", prefix, i);
        sync_send(b, batch, len);
        for (long i = 0; i < nn; i++) {
            sync_line(b, line, sizeof(line), "B's UNLOCK");
            if (strcmp(line, "OK 0") != 0)
                die(EXIT_DAEMON, "B's UNLOCK %s%ld answered: %s", prefix, i, line);
        }
    }
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    long long sum = 0;
    for (size_t i = 0; i < lat.n; i++) sum += lat.v[i];
    printf("p50_us=%lld p99_us=%lld samples=%zu names=%ld rounds=%ld seed=%llu mean_us=%lld "
           "max_us=%lld\n",
           (long long)pct(lat.v, lat.n, 50), (long long)pct(lat.v, lat.n, 99), lat.n, nn, rounds,
           (unsigned long long)seed, lat.n ? sum / (long long)lat.n : -1,
           lat.n ? (long long)lat.v[lat.n - 1] : -1);
    conn_close(a);
    conn_close(b);
    conn_close(adm);
    free(a), free(b), free(adm), free(batch), free(order), free(lat.v);
    return 0;
}

/* One tagged loop of `tagged`: its state and when its LOCK went out. */
typedef struct {
    int state;
    int64_t sent_at;
} tloop_t;

/* tagged: ONE connection carries -c (50) loops at once, each looping
 * "#L<t> LOCK k<t>" -> its OK -> "#U<t> UNLOCK k<t>" -> its OK, the names
 * those of `throughput`'s 50 connections; pairs are counted for -d seconds
 * after -w of warm-up, and printed as `throughput` prints them. The
 * requests that one read's replies call for go out in one write, as a
 * client that tags would send them. A reply whose tag is not in progress,
 * or that answers a LOCK with an UNLOCK's reply, ends the run (exit 3). */
static int cmd_tagged(opts_t *o) {
    long nl = o->conns ? o->conns : 50, secs = o->seconds ? o->seconds : 10;
    long warm = o->warmup;
    if (nl > 1000) die(EXIT_USAGE, "tagged: -c is at most 1000 loops (max_inflight is 1024)");
    ep_init();
    conn_t c;
    conn_init(&c, unix_connect(o->sock, REPLY_TIMEOUT_MS, 1), 0);
    ep_add(&c);
    tloop_t *ls = xmalloc((size_t)nl * sizeof(*ls));
    int64_t start = now_us();
    int64_t t0 = start + warm * 1000000LL, t1 = t0 + secs * 1000000LL;
    long long pairs = 0, all_pairs = 0;
    samples_t lat = {0};
    char req[64], line[512], tag[32];
    /* queued (conn_queue), written once per read by ep_send(c, "", 0) */
    for (long t = 0; t < nl; t++) {
        ls[t] = (tloop_t){.state = ST_LOCK_SENT, .sent_at = start};
        int n = snprintf(req, sizeof(req), "#L%ld LOCK k%ld\n", t, t);
        conn_queue(&c, req, (size_t)n);
    }
    ep_send(&c, "", 0);
    struct epoll_event evs[4];
    int64_t last_progress = start;
    for (;;) {
        int64_t now = now_us();
        if (now >= t1) break;
        if (now - last_progress > STALL_US)
            die(EXIT_DAEMON, "tagged: no reply for %lld s (daemon hangs?)",
                (long long)(STALL_US / 1000000));
        int n = epoll_wait(ep, evs, 4, 100);
        if (n < 0 && errno != EINTR) die(EXIT_LOCAL, "epoll_wait: %s", strerror(errno));
        now = now_us();
        for (int e = 0; e < n; e++) {
            if (evs[e].events & EPOLLOUT) ep_writable(&c);
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            conn_read(&c);
            while (conn_line(&c, line, sizeof(line))) {
                const char *rest = NULL;
                long t = -1;
                last_progress = now;
                if (split_tagged(line, tag, sizeof(tag), &rest))
                    t = tag_index(tag, tag[0] == 'U' ? 'U' : 'L', nl);
                if (t < 0) die(EXIT_DAEMON, "tagged: a reply of no loop's: %s", line);
                tloop_t *l = &ls[t];
                if (tag[0] == 'L' && l->state == ST_LOCK_SENT) {
                    long holds = 0;
                    if (parse_grant(rest, &holds) == 0 || holds != 1)
                        die(EXIT_DAEMON, "tagged: loop %ld's LOCK answered: %s", t, line);
                    l->state = ST_UNLOCK_SENT;
                    int m = snprintf(req, sizeof(req), "#U%ld UNLOCK k%ld\n", t, t);
                    conn_queue(&c, req, (size_t)m);
                } else if (tag[0] == 'U' && l->state == ST_UNLOCK_SENT) {
                    if (strcmp(rest, "OK 0") != 0)
                        die(EXIT_DAEMON, "tagged: loop %ld's UNLOCK answered: %s", t, line);
                    all_pairs++;
                    if (now >= t0 && now < t1) {
                        pairs++;
                        samples_add(&lat, now - l->sent_at);
                    }
                    l->state = ST_LOCK_SENT;
                    l->sent_at = now;
                    int m = snprintf(req, sizeof(req), "#L%ld LOCK k%ld\n", t, t);
                    conn_queue(&c, req, (size_t)m);
                } else {
                    die(EXIT_DAEMON, "tagged: loop %ld got '%s' while it waited for its %s", t,
                        line, l->state == ST_LOCK_SENT ? "LOCK" : "UNLOCK");
                }
            }
            ep_send(&c, "", 0);
        }
    }
    double elapsed = (double)(t1 - t0) / 1e6;
    double cpu = (double)cpu_self_us() / 1e6;
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    printf("pairs_per_sec=%.0f pairs=%lld seconds=%.3f connections=1 loops=%ld pair_p50_us=%lld "
           "pair_p99_us=%lld events=%lld client_cpu_pct=%.1f all_pairs=%lld\n",
           (double)pairs / elapsed, pairs, elapsed, nl, (long long)pct(lat.v, lat.n, 50),
           (long long)pct(lat.v, lat.n, 99), events_seen,
           100.0 * cpu / ((double)(now_us() - start) / 1e6), all_pairs);
    conn_close(&c);
    free(ls);
    free(lat.v);
    return 0;
}

/* ---- redisping, wait, info --------------------------------------------- */

static int cmd_redisping(opts_t *o) {
    long n = o->rounds ? o->rounds : 10000;
    conn_t *c = conn_open(o->sock, 0);
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    char line[64];
    samples_t lat = {0};
    for (long i = 0; i < n + 100; i++) {
        int64_t t0 = now_us();
        sync_send(c, ping, sizeof(ping) - 1);
        sync_line(c, line, sizeof(line), "PING");
        int64_t t1 = now_us();
        if (strcmp(line, "+PONG") != 0) die(EXIT_DAEMON, "PING answered: %s", line);
        if (i >= 100) samples_add(&lat, t1 - t0);
    }
    qsort(lat.v, lat.n, sizeof(*lat.v), cmp_i64);
    printf("p50_us=%lld p99_us=%lld rounds=%zu\n", (long long)pct(lat.v, lat.n, 50),
           (long long)pct(lat.v, lat.n, 99), lat.n);
    conn_close(c);
    free(c);
    free(lat.v);
    return 0;
}

/* Until dlockd answers and reports redis=up. */
static int cmd_wait(opts_t *o) {
    long timeout = o->timeout_ms ? o->timeout_ms : 5000;
    int64_t end = now_us() + timeout * 1000LL;
    char line[2048];
    for (;;) {
        int fd = unix_connect(o->sock, 1000, 0);
        if (fd >= 0) {
            conn_t c;
            conn_init(&c, fd, 0);
            request(&c, "INFO", line, sizeof(line));
            conn_close(&c);
            if (strstr(line, " redis=up") != NULL) return 0;
        }
        if (now_us() > end)
            die(EXIT_DAEMON, "dlockd on %s not ready with redis=up within %ld ms", o->sock,
                timeout);
        sleep_us(20000);
    }
}

static int cmd_info(opts_t *o) {
    conn_t *c = conn_open(o->sock, 0);
    char line[2048];
    request(c, "INFO", line, sizeof(line));
    printf("%s\n", line);
    conn_close(c);
    free(c);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: %s throughput -s SOCK [-c 50] [-d 10] [-w 1] [-m read|sem -k NAME [-p N] | -m multi [-p N]]\n"
            "       %s blocking -s SOCK [-c 8] [-d 10] [-w 1]\n"
            "       %s fleet -s PREFIX [-N 32] [-c 8] [-K 65536] [-d 10] [-w 1]\n"
            "       %s handoff -s SOCK1 [-S SOCK2 -R REDIS_SOCK] [-n 1000] [-k NAME]\n"
            "       %s fair -s SOCK [-c 100] [-n 1000] [-k NAME]\n"
            "       %s hol -s SOCK [-c 100] [-n 10] [-w 1] [-k PREFIX] [-r SEED]\n"
            "       %s tagged -s SOCK [-c 50] [-d 10] [-w 1]\n"
            "       %s scale -s SOCK [-c 10000] [-l 10] [-H 40]\n"
            "       %s herd -s SOCK [-c 1000] [-R REDIS_SOCK] [-k NAME]\n"
            "       %s upgrade -s SOCK [-c 10000] [-l 10] [-n 1000] [-p 4] [-w 1] [-t 30000]\n"
            "       %s redisping -s REDIS_SOCK [-n 10000]\n"
            "       %s wait -s SOCK [-t 5000]\n"
            "       %s info -s SOCK\n",
            prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        usage();
        return EXIT_USAGE;
    }
    opts_t o;
    memset(&o, 0, sizeof(o));
    o.warmup = 1;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage();
        return 0;
    }
    parse_opts(argc, argv, &o);
    if (!strcmp(cmd, "throughput")) return cmd_throughput(&o);
    if (!strcmp(cmd, "blocking")) return cmd_blocking(&o);
    if (!strcmp(cmd, "fleet")) return cmd_fleet(&o);
    if (!strcmp(cmd, "handoff")) return cmd_handoff(&o);
    if (!strcmp(cmd, "scale")) return cmd_scale(&o);
    if (!strcmp(cmd, "herd")) return cmd_herd(&o);
    if (!strcmp(cmd, "upgrade")) return cmd_upgrade(&o);
    if (!strcmp(cmd, "fair")) return cmd_fair(&o);
    if (!strcmp(cmd, "hol")) return cmd_hol(&o);
    if (!strcmp(cmd, "tagged")) return cmd_tagged(&o);
    if (!strcmp(cmd, "redisping")) return cmd_redisping(&o);
    if (!strcmp(cmd, "wait")) return cmd_wait(&o);
    if (!strcmp(cmd, "info")) return cmd_info(&o);
    usage();
    return EXIT_USAGE;
}
