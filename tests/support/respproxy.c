/* A RESP proxy for tests: passes commands to redis-server and replies back, answering SCAN itself when told to.
 * SPDX-License-Identifier: MIT */
#include "tests/support/respproxy.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define RP_CONNS  32            /* connections at once */
#define RP_FIFO   4096          /* commands awaiting their replies, per connection */
#define RP_DEPTH  16            /* nesting framed */

typedef struct rp_shared_s {
    volatile int mode;
    volatile long scans;
} rp_shared_t;

static rp_shared_t *shared;
static char sock_path[600];

typedef struct buf_s {
    char *p;
    size_t len, cap;
} rbuf_t;

typedef struct pair_s {
    int cfd, ufd;               /* the daemon's side, Redis's side; -1: free */
    int raw;                    /* subscribed: bytes pass as they come */
    rbuf_t cin, uin;            /* unframed bytes from each side */
    const char *fifo[RP_FIFO];  /* per command in order: NULL (Redis answers) or our reply */
    size_t head, count;
} pair_t;

static pair_t pairs[RP_CONNS];

static void rb_add(rbuf_t *b, const char *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL) _exit(3);
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void rb_drop(rbuf_t *b, size_t n) {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* the peer went: its read end says so */
        p += w;
        n -= (size_t)w;
    }
}

/* The number on the line at p (after the type byte); *end past its CRLF.
 * 0 when the line is not whole yet. */
static int line_num(const char *p, size_t n, long long *v, size_t *end) {
    const char *cr = memchr(p, '\r', n);
    if (cr == NULL || (size_t)(cr - p) + 1 >= n) return 0;
    *v = strtoll(p + 1, NULL, 10);
    *end = (size_t)(cr - p) + 2;
    return 1;
}

/* The length of the one RESP value at p, 0 while incomplete, -1 if it is
 * not RESP. */
static long frame(const char *p, size_t n, int depth) {
    long long v;
    size_t end;
    if (n == 0) return 0;
    if (depth > RP_DEPTH) return -1;
    if (!line_num(p, n, &v, &end)) return 0;
    switch (p[0]) {
    case '+': case '-': case ':': case '_': case ',': case '#': case '(':
        return (long)end;
    case '$': case '=': case '!':
        if (v < 0) return (long)end;
        return end + (size_t)v + 2 <= n ? (long)(end + (size_t)v + 2) : 0;
    case '*': case '~': case '>': case '%': case '|': {
        long long k = (p[0] == '%' || p[0] == '|') ? 2 * v : v;
        size_t at = end;
        for (long long i = 0; i < k; i++) {
            long e = frame(p + at, n - at, depth + 1);
            if (e <= 0) return e;
            at += (size_t)e;
        }
        return (long)at;
    }
    default:
        return -1;
    }
}

/* A command's name (its first bulk), in out. */
static void command_name(const char *p, size_t n, char *out, size_t cap) {
    long long v;
    size_t end, e2;
    out[0] = '\0';
    if (n == 0 || p[0] != '*' || !line_num(p, n, &v, &end) || v < 1) return;
    if (end >= n || p[end] != '$' || !line_num(p + end, n - end, &v, &e2) || v < 0) return;
    size_t l = (size_t)v < cap - 1 ? (size_t)v : cap - 1;
    memcpy(out, p + end + e2, l);
    out[l] = '\0';
}

static void pair_close(pair_t *x) {
    close(x->cfd);
    close(x->ufd);
    x->cfd = x->ufd = -1;
    x->cin.len = x->uin.len = 0;
    x->head = x->count = 0;
    x->raw = 0;
}

/* Our replies at the head of the line go out. */
static void flush_ours(pair_t *x) {
    while (x->count > 0 && x->fifo[x->head] != NULL) {
        write_all(x->cfd, x->fifo[x->head], strlen(x->fifo[x->head]));
        x->head = (x->head + 1) % RP_FIFO;
        x->count--;
    }
}

static void from_daemon(pair_t *x) {
    for (;;) {
        if (x->raw) {
            write_all(x->ufd, x->cin.p, x->cin.len);
            x->cin.len = 0;
            return;
        }
        long n = frame(x->cin.p, x->cin.len, 0);
        if (n == 0) return;
        if (n < 0 || x->count == RP_FIFO) { /* not ours to judge: pass it all */
            x->raw = 1;
            continue;
        }
        char name[32];
        command_name(x->cin.p, (size_t)n, name, sizeof(name));
        const char *ours = NULL;
        if (strcasecmp(name, "SUBSCRIBE") == 0 || strcasecmp(name, "SSUBSCRIBE") == 0 ||
            strcasecmp(name, "PSUBSCRIBE") == 0)
            x->raw = 1;
        else if (strcasecmp(name, "SCAN") == 0 && shared->mode == RP_SCAN_ENDLESS)
            ours = "*2\r\n$1\r\n1\r\n*0\r\n";
        else if (strcasecmp(name, "SCAN") == 0 && shared->mode == RP_SCAN_SLOW) {
            usleep(RP_SLOW_US);
            ours = "*2\r\n$1\r\n1\r\n*1\r\n$13\r\ndlock:nothing\r\n";
        }
        else if (strcasecmp(name, "SCAN") == 0 && shared->mode == RP_SCAN_HUGE)
            ours = "*2147483647\r\n";
        if (ours != NULL) {
            __sync_fetch_and_add(&shared->scans, 1);
        } else {
            write_all(x->ufd, x->cin.p, (size_t)n);
        }
        if (!x->raw) {
            x->fifo[(x->head + x->count) % RP_FIFO] = ours;
            x->count++;
        }
        rb_drop(&x->cin, (size_t)n);
        flush_ours(x);
    }
}

static void from_redis(pair_t *x) {
    for (;;) {
        long n = x->raw ? (long)x->uin.len : frame(x->uin.p, x->uin.len, 0);
        if (n < 0) {
            x->raw = 1;
            continue;
        }
        if (n == 0) return;
        write_all(x->cfd, x->uin.p, (size_t)n);
        rb_drop(&x->uin, (size_t)n);
        if (x->count > 0 && !x->raw) { /* Redis's reply to the head */
            x->head = (x->head + 1) % RP_FIFO;
            x->count--;
        }
        flush_ours(x);
    }
}

static int connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) _exit(4);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

static void run(int lfd, const char *upstream) {
    for (size_t i = 0; i < RP_CONNS; i++) pairs[i].cfd = pairs[i].ufd = -1;
    for (;;) {
        struct pollfd pf[1 + 2 * RP_CONNS];
        pair_t *of[1 + 2 * RP_CONNS];
        size_t n = 0;
        pf[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (size_t i = 0; i < RP_CONNS; i++) {
            if (pairs[i].cfd < 0) continue;
            of[n] = &pairs[i];
            pf[n++] = (struct pollfd){.fd = pairs[i].cfd, .events = POLLIN};
            of[n] = &pairs[i];
            pf[n++] = (struct pollfd){.fd = pairs[i].ufd, .events = POLLIN};
        }
        if (poll(pf, n, -1) < 0) {
            if (errno == EINTR) continue;
            _exit(2);
        }
        if (pf[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            int ufd = cfd >= 0 ? connect_unix(upstream) : -1;
            pair_t *x = NULL;
            for (size_t i = 0; i < RP_CONNS && x == NULL; i++)
                if (pairs[i].cfd < 0) x = &pairs[i];
            if (x == NULL || ufd < 0) {
                if (cfd >= 0) close(cfd);
                if (ufd >= 0) close(ufd);
            } else {
                x->cfd = cfd;
                x->ufd = ufd;
            }
        }
        for (size_t i = 1; i < n; i++) {
            pair_t *x = of[i];
            if (x->cfd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char b[65536];
            ssize_t r = read(pf[i].fd, b, sizeof(b));
            if (r <= 0) {
                pair_close(x);
                continue;
            }
            if (pf[i].fd == x->cfd) {
                rb_add(&x->cin, b, (size_t)r);
                from_daemon(x);
            } else {
                rb_add(&x->uin, b, (size_t)r);
                from_redis(x);
            }
        }
    }
}

const char *rp_start(const char *upstream) {
    shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                  -1, 0);
    ck_assert_ptr_ne(shared, MAP_FAILED);
    shared->mode = RP_PASS;
    shared->scans = 0;
    snprintf(sock_path, sizeof(sock_path), "%s/proxy.sock", h_dir());
    unlink(sock_path);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(sock_path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(lfd, 64), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        /* The test's own connections stay the test's: a copy here would
         * keep one open after the test closed it. */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != lfd) close(fd);
        run(lfd, upstream);
        _exit(0);
    }
    close(lfd);
    return sock_path;
}

void rp_mode(rp_mode_t mode) {
    shared->mode = (int)mode;
}

long rp_scans(void) {
    return shared->scans;
}
