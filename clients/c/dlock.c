/* libdlock: blocking requests to dlockd over its Unix socket, with !LOST events.
 * SPDX-License-Identifier: MIT */
#include "dlock.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A waiting call's state, for dlock_cancel() from another thread. */
enum {
    WAIT_NONE,       /* no waiting call */
    WAIT_SENDING,    /* its request is being written */
    WAIT_SENT,       /* it waits for its reply */
    WAIT_PENDING,    /* cancelled while being written: the call sends CANCEL */
    WAIT_CANCELLED   /* CANCEL was written behind it: its reply comes too */
};

/* A name observed with dlock_observe(). */
typedef struct observer_s {
    struct observer_s *next;
    dlock_leader_cb cb;
    void *data;
    char name[DLOCK_NAME_MAX + 1];
} observer_t;

struct dlock_s {
    int fd;
    int closed;                     /* EOF or an error was seen */
    atomic_int wait;                /* WAIT_*: the only field another thread touches */
    dlock_lost_cb lost_cb;
    void *lost_data;
    observer_t *observers;          /* the names observed, newest first */
    size_t len;                     /* bytes in buf */
    char buf[2 * DLOCK_LINE_MAX];   /* read but not yet consumed */
    char line[DLOCK_LINE_MAX + 1];  /* the last line taken from buf */
};

static const struct {
    const char *name;
    const char *text;
} errors[] = {
#define XX(id, text) {#id, text},
    DLOCK_ERR_MAP(XX)
#undef XX
};

static int err_index(int err) {
    int i = err - DLOCK_ERR_BASE_ - 1;
    return i >= 0 && i < (int)(sizeof(errors) / sizeof(errors[0])) ? i : -1;
}

/* Why this thread's last dlock_connect() failed, naming the socket (a
 * usable one has at most 107 bytes; a longer path is cut); empty after a
 * success or a failure of another kind. dlock_strerror(DLOCK_ECONNECT)
 * returns it. */
static _Thread_local char connect_msg[512];

/* Why this thread's last call refused a name itself (bad_name()): the
 * name shown quoted, each byte outside 0x20-0x7E (and '"', '\\') escaped,
 * cut after NAME_SHOWN bytes; empty once dlockd answered ERR NAME.
 * dlock_strerror(DLOCK_ENAME) returns it. */
#define NAME_SHOWN 40          /* bytes of a bad name shown; the rest is "..." */
#define NAME_MSG_MAX 320       /* fits NAME_SHOWN bytes escaped (4 each) and the words */
static _Thread_local char name_msg[NAME_MSG_MAX];

/* A hint for the usual reasons a connect fails. */
static const char *connect_hint(int e) {
    switch (e) {
    case ENOENT:
    case ECONNREFUSED: return " (is dlockd running?)";
    case EACCES: return " (add yourself to the dlockd group, or check socket_mode)";
    default: return "";
    }
}

static void set_connect_msg(const char *path, int e) {
    snprintf(connect_msg, sizeof(connect_msg), "%s at %s: %s%s",
             errors[err_index(DLOCK_ECONNECT)].text, path, strerror(e), connect_hint(e));
}

const char *dlock_strerror(int err) {
    if (err == 0) return "success";
    if (err == DLOCK_ECONNECT && connect_msg[0] != '\0') return connect_msg;
    if (err == DLOCK_ENAME && name_msg[0] != '\0') return name_msg;
    int i = err_index(err);
    return i >= 0 ? errors[i].text : "unknown error";
}

const char *dlock_err_name(int err) {
    if (err == 0) return "OK";
    int i = err_index(err);
    return i >= 0 ? errors[i].name : "?";
}

/* The DLOCK_E* code for a protocol error code word. */
static int err_from_code(const char *code, size_t len) {
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (strlen(errors[i].name) == len && memcmp(errors[i].name, code, len) == 0)
            return DLOCK_ERR_BASE_ + 1 + (int)i;
    return DLOCK_EPROTO;
}

static int name_ok(const char *name) {
    if (name == NULL) return 0; /* bad_name() says so */
    size_t len = strlen(name);
    if (len == 0 || len > DLOCK_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x21 || (unsigned char)name[i] > 0x7e) return 0;
    return 1;
}

/* DLOCK_ENAME for a name name_ok() refused, with name_msg saying which
 * name and why: the same words as the other clients', so that a caller
 * printing dlock_strerror() shows the name. */
static int bad_name(const char *name) {
    if (name == NULL) {
        snprintf(name_msg, sizeof(name_msg), "%s: NULL", errors[err_index(DLOCK_ENAME)].text);
        return DLOCK_ENAME;
    }
    size_t len = strlen(name), at = 0;
    char shown[NAME_SHOWN * 4 + 1];
    for (size_t i = 0; i < len && i < NAME_SHOWN; i++) {
        unsigned char b = (unsigned char)name[i];
        if (b == '"' || b == '\\')
            at += (size_t)snprintf(shown + at, sizeof(shown) - at, "\\%c", b);
        else if (b < 0x20 || b > 0x7e)
            at += (size_t)snprintf(shown + at, sizeof(shown) - at, "\\x%02x", b);
        else
            shown[at++] = (char)b;
    }
    shown[at] = '\0';
    char cut[48] = "";
    if (len > NAME_SHOWN) snprintf(cut, sizeof(cut), "... (%zu bytes)", len);
    if (len == 0 || len > DLOCK_NAME_MAX)
        snprintf(name_msg, sizeof(name_msg), "%s \"%s\"%s: must be 1 to %d bytes",
                 errors[err_index(DLOCK_ENAME)].text, shown, cut, DLOCK_NAME_MAX);
    else
        snprintf(name_msg, sizeof(name_msg),
                 "%s \"%s\"%s: only printable ASCII without spaces is allowed",
                 errors[err_index(DLOCK_ENAME)].text, shown, cut);
    return DLOCK_ENAME;
}

dlock_t *dlock_connect(const char *path, int *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int e = DLOCK_ECONNECT;

    connect_msg[0] = '\0';
    if (path == NULL || path[0] == '\0') path = getenv(DLOCK_SOCKET_ENV);
    if (path == NULL || path[0] == '\0') path = DLOCK_DEFAULT_SOCKET;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        set_connect_msg(path, errno);
        goto fail;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    dlock_t *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        e = DLOCK_ENOMEM;
        goto fail;
    }
    d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (d->fd < 0 || connect(d->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int saved = errno;
        if (d->fd >= 0) close(d->fd);
        free(d);
        set_connect_msg(path, saved);
        errno = saved;
        goto fail;
    }
    return d;
fail:
    if (err) *err = e;
    return NULL;
}

void dlock_close(dlock_t *d) {
    if (d == NULL) return;
    if (!d->closed) {
        /* Best effort: the close itself is what releases the locks. */
        ssize_t n = send(d->fd, "QUIT\n", 5, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)n;
    }
    close(d->fd);
    while (d->observers != NULL) {
        observer_t *o = d->observers;
        d->observers = o->next;
        free(o);
    }
    free(d);
}

void dlock_set_lost_cb(dlock_t *d, dlock_lost_cb cb, void *data) {
    d->lost_cb = cb;
    d->lost_data = data;
}

int dlock_fd(const dlock_t *d) {
    return d->fd;
}

static observer_t *observer_find(const dlock_t *d, const char *name) {
    for (observer_t *o = d->observers; o != NULL; o = o->next)
        if (strcmp(o->name, name) == 0) return o;
    return NULL;
}

/* Strict decimal: 0 with *v, or -1. */
static int parse_u64(const char *s, uint64_t *v) {
    uint64_t n = 0;
    if (*s == '\0') return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || n > (UINT64_MAX - 9) / 10) return -1;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    *v = n;
    return 0;
}

/* "<fence> <value>" or "NONE" (changed in place): 1 and the leader, 0 for
 * NONE (fence 0, value NULL), -1 if it is neither. */
static int parse_leader(char *words, uint64_t *fence, const char **value) {
    *fence = 0;
    *value = NULL;
    if (strcmp(words, "NONE") == 0) return 0;
    char *sp = strchr(words, ' ');
    if (sp == NULL || sp[1] == '\0' || strchr(sp + 1, ' ') != NULL) return -1;
    *sp = '\0';
    if (parse_u64(words, fence) != 0) return -1;
    *value = sp + 1;
    return 1;
}

/* "!LEADER <name> <fence> <value>" or "!LEADER <name> NONE". */
static void on_leader(dlock_t *d, char *name) {
    char *sp = strchr(name, ' ');
    if (sp == NULL) return;
    *sp = '\0';
    observer_t *o = observer_find(d, name);
    uint64_t fence;
    const char *value;
    if (o == NULL || o->cb == NULL || parse_leader(sp + 1, &fence, &value) < 0) return;
    o->cb(d, name, fence, value, o->data);
}

/* Handles an event line ("!..."). */
static void on_event(dlock_t *d, char *line) {
    if (strncmp(line, "!LEADER ", 8) == 0) {
        on_leader(d, line + 8);
        return;
    }
    if (strncmp(line, "!LOST ", 6) != 0 || d->lost_cb == NULL) return;
    char *name = line + 6;
    char *sp = strchr(name, ' ');
    const char *reason = "";
    if (sp != NULL) {
        *sp = '\0';
        reason = sp + 1;
    }
    d->lost_cb(d, name, reason, d->lost_data);
}

/* Takes one complete line out of buf into d->line. Returns 1 if there was
 * one, 0 if not, DLOCK_EPROTO if a line is too long. */
static int take_line(dlock_t *d) {
    char *lf = memchr(d->buf, '\n', d->len);
    if (lf == NULL) return d->len >= DLOCK_LINE_MAX ? DLOCK_EPROTO : 0;
    size_t n = (size_t)(lf - d->buf);
    if (n > DLOCK_LINE_MAX) return DLOCK_EPROTO;
    memcpy(d->line, d->buf, n);
    if (n > 0 && d->line[n - 1] == '\r') n--;
    d->line[n] = '\0';
    d->len -= (size_t)(lf - d->buf) + 1;
    memmove(d->buf, lf + 1, d->len);
    return 1;
}

/* Reads once, waiting at most timeout_ms. Returns bytes read, 0 on timeout,
 * or a negative code. */
static int fill(dlock_t *d, int timeout_ms) {
    if (d->closed) return DLOCK_ECLOSED;
    if (timeout_ms >= 0) { /* with none, the blocking read waits */
        struct pollfd pfd = {.fd = d->fd, .events = POLLIN};
        int r;
        do {
            r = poll(&pfd, 1, timeout_ms);
        } while (r < 0 && errno == EINTR);
        if (r < 0) return DLOCK_EIO;
        if (r == 0) return 0;
    }
    ssize_t n;
    do {
        n = read(d->fd, d->buf + d->len, sizeof(d->buf) - d->len);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        d->closed = 1;
        return n == 0 || errno == ECONNRESET ? DLOCK_ECLOSED : DLOCK_EIO;
    }
    d->len += (size_t)n;
    return (int)n;
}

/* Hands the complete event lines at the head of buf to on_event(): they
 * came in the same read as a reply, so the caller polling dlock_fd() for
 * events would never see them. d->line (the reply) is left as it is. */
static void on_buffered_events(dlock_t *d) {
    char ev[DLOCK_LINE_MAX + 1];
    while (d->len > 0 && d->buf[0] == '!') {
        char *lf = memchr(d->buf, '\n', d->len);
        if (lf == NULL) return;
        size_t n = (size_t)(lf - d->buf);
        if (n > DLOCK_LINE_MAX) return; /* take_line() says DLOCK_EPROTO later */
        memcpy(ev, d->buf, n);
        if (n > 0 && ev[n - 1] == '\r') n--;
        ev[n] = '\0';
        d->len -= (size_t)(lf - d->buf) + 1;
        memmove(d->buf, lf + 1, d->len);
        on_event(d, ev);
    }
}

/* Reads lines until a reply (not an event) is in d->line; the events
 * before it, and those read along with it, go to on_event(). */
static int read_reply(dlock_t *d) {
    for (;;) {
        int r = take_line(d);
        if (r < 0) return r;
        if (r == 1) {
            if (d->line[0] == '!') {
                on_event(d, d->line);
                continue;
            }
            on_buffered_events(d);
            return 0;
        }
        r = fill(d, -1);
        if (r < 0) return r;
    }
}

static int send_all(dlock_t *d, const char *data, size_t len) {
    if (d->closed) return DLOCK_ECLOSED;
    while (len > 0) {
        ssize_t n = send(d->fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            d->closed = 1;
            return errno == EPIPE || errno == ECONNRESET ? DLOCK_ECLOSED : DLOCK_EIO;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The reply in d->line: 0 for OK, a negative code for TIMEOUT and ERR. */
static int classify(const dlock_t *d) {
    if (strncmp(d->line, "OK", 2) == 0 && (d->line[2] == '\0' || d->line[2] == ' ')) return 0;
    if (strncmp(d->line, "TIMEOUT ", 8) == 0) return DLOCK_ETIMEOUT;
    if (strncmp(d->line, "ERR ", 4) == 0) {
        const char *code = d->line + 4;
        int err = err_from_code(code, strcspn(code, " "));
        if (err == DLOCK_ENAME) name_msg[0] = '\0'; /* not a name this thread refused */
        return err;
    }
    return DLOCK_EPROTO;
}

/* Sends line + LF and leaves the reply in d->line. Returns 0 for OK, a
 * negative code for TIMEOUT and ERR replies. */
static int roundtrip(dlock_t *d, const char *line) {
    char req[DLOCK_LINE_MAX + 2];
    size_t n = strlen(line);
    if (n > DLOCK_LINE_MAX) return DLOCK_ETOOLONG;
    memcpy(req, line, n);
    req[n++] = '\n';
    int r = send_all(d, req, n);
    if (r == 0) r = read_reply(d);
    return r < 0 ? r : classify(d);
}

int dlock_cancel(dlock_t *d) {
    int s = atomic_load(&d->wait);
    for (;;) {
        if (s == WAIT_SENDING) {
            if (atomic_compare_exchange_weak(&d->wait, &s, WAIT_PENDING)) return 1;
        } else if (s == WAIT_SENT) {
            if (atomic_compare_exchange_weak(&d->wait, &s, WAIT_CANCELLED)) {
                /* A failed write ends the connection: the call sees that. */
                ssize_t n = send(d->fd, "CANCEL\n", 7, MSG_NOSIGNAL);
                (void)n;
                return 1;
            }
        } else {
            return 0;
        }
    }
}

/* roundtrip() for a request that may wait, which dlock_cancel() may
 * withdraw: then DLOCK_ECANCELLED, and a grant that raced the cancel is
 * given back with the request undo ("UNLOCK x", "RELEASE x 2"; NULL when
 * a grant holds nothing: AWAIT). */
static int roundtrip_wait(dlock_t *d, const char *line, const char *undo) {
    char req[DLOCK_LINE_MAX + 2];
    size_t n = strlen(line);
    if (n > DLOCK_LINE_MAX) return DLOCK_ETOOLONG;
    memcpy(req, line, n);
    req[n++] = '\n';
    atomic_store(&d->wait, WAIT_SENDING);
    int r = send_all(d, req, n);
    int s = WAIT_SENDING;
    if (r == 0 && !atomic_compare_exchange_strong(&d->wait, &s, WAIT_SENT)) {
        atomic_store(&d->wait, WAIT_CANCELLED); /* cancelled while sending */
        r = send_all(d, "CANCEL\n", 7);
    }
    if (r == 0) r = read_reply(d);
    s = atomic_exchange(&d->wait, WAIT_NONE);
    if (r < 0) return r;
    if (s != WAIT_CANCELLED) return classify(d);
    int granted = classify(d) == 0;
    r = read_reply(d); /* CANCEL's: OK 1 (withdrawn), or OK 0 (it was answered) */
    if (r < 0) return r;
    if (strncmp(d->line, "OK", 2) != 0) return DLOCK_EPROTO;
    if (granted && undo != NULL) {
        r = roundtrip(d, undo);
        if (r == DLOCK_ECLOSED || r == DLOCK_EIO || r == DLOCK_EPROTO) return r;
    }
    return DLOCK_ECANCELLED;
}

/* The request that gives back a grant of verb (LOCK, TRYRLOCK, ...). */
static const char *undo_verb(const char *verb) {
    if (strncmp(verb, "TRY", 3) == 0) verb += 3;
    if (strcmp(verb, "RLOCK") == 0) return "RUNLOCK";
    if (strcmp(verb, "WLOCK") == 0) return "WUNLOCK";
    return "UNLOCK"; /* LOCK, FAIRLOCK */
}

int dlock_request(dlock_t *d, const char *line, char *buf, size_t len) {
    int r = roundtrip(d, line);
    if ((r == 0 || d->line[0] != '\0') && buf != NULL && len > 0)
        snprintf(buf, len, "%s", d->line);
    return r;
}

/* Parses "OK <fence> <holds>". */
static int parse_grant(const dlock_t *d, uint64_t *fence, uint32_t *holds) {
    unsigned long long f;
    unsigned h;
    if (sscanf(d->line, "OK %llu %u", &f, &h) != 2) return DLOCK_EPROTO;
    if (fence) *fence = f;
    if (holds) *holds = h;
    return 0;
}

/* verb NAME LEASE_MS: LOCK, RLOCK, WLOCK or FAIRLOCK. */
static int take(dlock_t *d, const char *verb, const char *name, uint32_t lease_ms,
                uint64_t *fence, uint32_t *holds) {
    char line[DLOCK_NAME_MAX + 64];
    char undo[DLOCK_NAME_MAX + 16];
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s %u", verb, name, lease_ms);
    snprintf(undo, sizeof(undo), "%s %s", undo_verb(verb), name);
    int r = roundtrip_wait(d, line, undo);
    return r == 0 ? parse_grant(d, fence, holds) : r;
}

/* verb NAME WAIT_MS LEASE_MS: TRYLOCK, TRYRLOCK, TRYWLOCK or TRYFAIRLOCK. */
static int try_take(dlock_t *d, const char *verb, const char *name, uint32_t wait_ms,
                    uint32_t lease_ms, uint64_t *fence, uint32_t *holds, long long *ttl_ms) {
    char line[DLOCK_NAME_MAX + 64];
    char undo[DLOCK_NAME_MAX + 16];
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s %u %u", verb, name, wait_ms, lease_ms);
    snprintf(undo, sizeof(undo), "%s %s", undo_verb(verb), name);
    int r = wait_ms > 0 ? roundtrip_wait(d, line, undo) : roundtrip(d, line);
    if (r == DLOCK_ETIMEOUT && ttl_ms != NULL && sscanf(d->line, "TIMEOUT %lld", ttl_ms) != 1)
        *ttl_ms = -1;
    return r == 0 ? parse_grant(d, fence, holds) : r;
}

/* verb NAME: UNLOCK, RUNLOCK or WUNLOCK, answered "OK <holds_left>". */
static int drop(dlock_t *d, const char *verb, const char *name, uint32_t *holds_left) {
    char line[DLOCK_NAME_MAX + 16];
    unsigned left;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s", verb, name);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (sscanf(d->line, "OK %u", &left) != 1) return DLOCK_EPROTO;
    if (holds_left) *holds_left = left;
    return 0;
}

int dlock_lock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
               uint32_t *holds) {
    return take(d, "LOCK", name, lease_ms, fence, holds);
}

int dlock_trylock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                  uint64_t *fence, uint32_t *holds, long long *ttl_ms) {
    return try_take(d, "TRYLOCK", name, wait_ms, lease_ms, fence, holds, ttl_ms);
}

int dlock_unlock(dlock_t *d, const char *name, uint32_t *holds_left) {
    return drop(d, "UNLOCK", name, holds_left);
}

int dlock_rlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                uint32_t *holds) {
    return take(d, "RLOCK", name, lease_ms, fence, holds);
}

int dlock_wlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                uint32_t *holds) {
    return take(d, "WLOCK", name, lease_ms, fence, holds);
}

int dlock_tryrlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                   uint64_t *fence, uint32_t *holds, long long *ttl_ms) {
    return try_take(d, "TRYRLOCK", name, wait_ms, lease_ms, fence, holds, ttl_ms);
}

int dlock_trywlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                   uint64_t *fence, uint32_t *holds, long long *ttl_ms) {
    return try_take(d, "TRYWLOCK", name, wait_ms, lease_ms, fence, holds, ttl_ms);
}

int dlock_runlock(dlock_t *d, const char *name, uint32_t *holds_left) {
    return drop(d, "RUNLOCK", name, holds_left);
}

int dlock_wunlock(dlock_t *d, const char *name, uint32_t *holds_left) {
    return drop(d, "WUNLOCK", name, holds_left);
}

int dlock_fairlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                   uint32_t *holds) {
    return take(d, "FAIRLOCK", name, lease_ms, fence, holds);
}

int dlock_tryfairlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                      uint64_t *fence, uint32_t *holds, long long *ttl_ms) {
    return try_take(d, "TRYFAIRLOCK", name, wait_ms, lease_ms, fence, holds, ttl_ms);
}

/* Checks a multi-lock's names (DLOCK_EARGS: n out of range or a name twice;
 * DLOCK_ENAME) and writes "<n> <name1> ... <name_n>" into buf. Returns the
 * length, or a negative code (DLOCK_ETOOLONG when it does not fit). */
static int mnames(char *buf, size_t cap, size_t n, const char *const *names) {
    if (n == 0 || n > DLOCK_MNAMES_MAX || names == NULL) return DLOCK_EARGS;
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || !name_ok(names[i])) return bad_name(names[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) return DLOCK_EARGS;
    }
    int len = snprintf(buf, cap, "%zu", n);
    for (size_t i = 0; i < n && (size_t)len < cap; i++)
        len += snprintf(buf + len, cap - (size_t)len, " %s", names[i]);
    return (size_t)len < cap ? len : DLOCK_ETOOLONG;
}

/* Parses "OK <v1> ... <v_n>" (n numbers, nothing more) into v (may be NULL). */
static int parse_list(const dlock_t *d, size_t n, uint64_t *v) {
    const char *p = d->line + 2;
    for (size_t i = 0; i < n; i++) {
        char word[24];
        size_t len;
        if (*p != ' ') return DLOCK_EPROTO;
        p++;
        len = strcspn(p, " ");
        uint64_t x;
        if (len == 0 || len >= sizeof(word)) return DLOCK_EPROTO;
        memcpy(word, p, len);
        word[len] = '\0';
        if (parse_u64(word, &x) != 0) return DLOCK_EPROTO;
        if (v) v[i] = x;
        p += len;
    }
    return *p == '\0' ? 0 : DLOCK_EPROTO;
}

/* MLOCK (wait_ms < 0) or TRYMLOCK. */
static int mtake(dlock_t *d, size_t n, const char *const *names, long long wait_ms,
                 uint32_t lease_ms, uint64_t *fences, long long *ttl_ms) {
    char line[DLOCK_LINE_MAX + 1], undo[DLOCK_LINE_MAX + 1];
    int len = mnames(undo + 8, sizeof(undo) - 8, n, names);
    if (len < 0) return len;
    if (wait_ms > 2147483647 || lease_ms > 2147483647u) return DLOCK_EARGS;
    memcpy(undo, "MUNLOCK ", 8);
    if (wait_ms < 0)
        len = snprintf(line, sizeof(line), "MLOCK %s %u", undo + 8, lease_ms);
    else
        len = snprintf(line, sizeof(line), "TRYMLOCK %s %lld %u", undo + 8, wait_ms, lease_ms);
    if ((size_t)len >= sizeof(line)) return DLOCK_ETOOLONG;
    int r = wait_ms != 0 ? roundtrip_wait(d, line, undo) : roundtrip(d, line);
    if (r == DLOCK_ETIMEOUT && ttl_ms != NULL && sscanf(d->line, "TIMEOUT %lld", ttl_ms) != 1)
        *ttl_ms = -1;
    return r == 0 ? parse_list(d, n, fences) : r;
}

int dlock_mlock(dlock_t *d, size_t n, const char *const *names, uint32_t lease_ms,
                uint64_t *fences) {
    return mtake(d, n, names, -1, lease_ms, fences, NULL);
}

int dlock_trymlock(dlock_t *d, size_t n, const char *const *names, uint32_t wait_ms,
                   uint32_t lease_ms, uint64_t *fences, long long *ttl_ms) {
    return mtake(d, n, names, wait_ms, lease_ms, fences, ttl_ms);
}

int dlock_munlock(dlock_t *d, size_t n, const char *const *names, uint32_t *holds_left) {
    char line[DLOCK_LINE_MAX + 1];
    uint64_t left[DLOCK_MNAMES_MAX];
    int len = mnames(line + 8, sizeof(line) - 8, n, names);
    if (len < 0) return len;
    memcpy(line, "MUNLOCK ", 8);
    int r = roundtrip(d, line);
    if (r == 0) r = parse_list(d, n, left);
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (left[i] > UINT32_MAX) return DLOCK_EPROTO;
        if (holds_left) holds_left[i] = (uint32_t)left[i];
    }
    return r;
}

/* Parses "OK <n>" (a count of permits, SEMINIT's 0 or 1). */
static int parse_count(const dlock_t *d, uint32_t *n) {
    unsigned v;
    if (sscanf(d->line, "OK %u", &v) != 1) return DLOCK_EPROTO;
    if (n) *n = v;
    return 0;
}

int dlock_seminit(dlock_t *d, const char *name, uint32_t permits, int *set) {
    char line[DLOCK_NAME_MAX + 32];
    uint32_t v;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "SEMINIT %s %u", name, permits);
    int r = roundtrip(d, line);
    if (r == 0) r = parse_count(d, &v);
    if (r == 0 && v > 1) r = DLOCK_EPROTO;
    if (r == 0 && set) *set = (int)v;
    return r;
}

/* ACQUIRE NAME PERMITS, or TRYACQUIRE NAME PERMITS WAIT_MS (wait_ms >= 0),
 * with LEASE_MS when it is not 0: "OK <held>". */
static int sem_take(dlock_t *d, const char *name, uint32_t permits, long long wait_ms,
                    uint32_t lease_ms, uint32_t *held) {
    char line[DLOCK_NAME_MAX + 64];
    int n;
    if (!name_ok(name)) return bad_name(name);
    if (wait_ms < 0)
        n = snprintf(line, sizeof(line), "ACQUIRE %s %u", name, permits);
    else
        n = snprintf(line, sizeof(line), "TRYACQUIRE %s %u %lld", name, permits, wait_ms);
    if (lease_ms != 0) snprintf(line + n, sizeof(line) - (size_t)n, " %u", lease_ms);
    char undo[DLOCK_NAME_MAX + 32];
    snprintf(undo, sizeof(undo), "RELEASE %s %u", name, permits);
    int r = wait_ms != 0 ? roundtrip_wait(d, line, undo) : roundtrip(d, line);
    return r == 0 ? parse_count(d, held) : r;
}

int dlock_acquire(dlock_t *d, const char *name, uint32_t permits, uint32_t lease_ms,
                  uint32_t *held) {
    return sem_take(d, name, permits, -1, lease_ms, held);
}

int dlock_tryacquire(dlock_t *d, const char *name, uint32_t permits, uint32_t wait_ms,
                     uint32_t lease_ms, uint32_t *held) {
    return sem_take(d, name, permits, wait_ms, lease_ms, held);
}

int dlock_release(dlock_t *d, const char *name, uint32_t permits, uint32_t *left) {
    char line[DLOCK_NAME_MAX + 32];
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "RELEASE %s %u", name, permits);
    int r = roundtrip(d, line);
    return r == 0 ? parse_count(d, left) : r;
}

int dlock_latchset(dlock_t *d, const char *name, uint32_t count, int *set) {
    char line[DLOCK_NAME_MAX + 32];
    uint32_t v;
    if (!name_ok(name)) return bad_name(name);
    if (count == 0 || count > 2147483647u) return DLOCK_EARGS;
    snprintf(line, sizeof(line), "LATCHSET %s %u", name, count);
    int r = roundtrip(d, line);
    if (r == 0) r = parse_count(d, &v);
    if (r == 0 && v > 1) r = DLOCK_EPROTO;
    if (r == 0 && set) *set = (int)v;
    return r;
}

/* verb NAME answered "OK <count>": COUNTDOWN, LATCHCOUNT. */
static int latch_count(dlock_t *d, const char *verb, const char *name, uint32_t *count) {
    char line[DLOCK_NAME_MAX + 16];
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s", verb, name);
    int r = roundtrip(d, line);
    return r == 0 ? parse_count(d, count) : r;
}

int dlock_countdown(dlock_t *d, const char *name, uint32_t *left) {
    return latch_count(d, "COUNTDOWN", name, left);
}

int dlock_latchcount(dlock_t *d, const char *name, uint32_t *count) {
    return latch_count(d, "LATCHCOUNT", name, count);
}

/* AWAIT NAME (wait_ms < 0) or TRYAWAIT NAME WAIT_MS: "OK 0", or "TIMEOUT
 * <count>". Nothing to give back when the opening raced a cancel. */
static int await_zero(dlock_t *d, const char *name, long long wait_ms, uint32_t *count) {
    char line[DLOCK_NAME_MAX + 32];
    if (!name_ok(name)) return bad_name(name);
    if (wait_ms > 2147483647) return DLOCK_EARGS;
    if (wait_ms < 0)
        snprintf(line, sizeof(line), "AWAIT %s", name);
    else
        snprintf(line, sizeof(line), "TRYAWAIT %s %lld", name, wait_ms);
    int r = wait_ms != 0 ? roundtrip_wait(d, line, NULL) : roundtrip(d, line);
    if (r == DLOCK_ETIMEOUT) {
        unsigned v;
        int used = 0;
        if (sscanf(d->line, "TIMEOUT %u%n", &v, &used) != 1 || d->line[used] != '\0')
            return DLOCK_EPROTO;
        if (count) *count = v;
        return r;
    }
    if (r == 0 && strcmp(d->line, "OK 0") != 0) return DLOCK_EPROTO;
    if (r == 0 && count) *count = 0;
    return r;
}

int dlock_await(dlock_t *d, const char *name) {
    return await_zero(d, name, -1, NULL);
}

int dlock_tryawait(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t *count) {
    return await_zero(d, name, wait_ms, count);
}

int dlock_renew(dlock_t *d, const char *name, uint32_t lease_ms, long long *ttl_ms) {
    char line[DLOCK_NAME_MAX + 32];
    long long ttl;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "RENEW %s %u", name, lease_ms);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (sscanf(d->line, "OK %lld", &ttl) != 1) return DLOCK_EPROTO;
    if (ttl_ms) *ttl_ms = ttl;
    return 0;
}

int dlock_status(dlock_t *d, const char *name, dlock_status_t *out) {
    char line[DLOCK_NAME_MAX + 16];
    dlock_status_t st = {DLOCK_FREE, 0, -1, {0}};
    unsigned long long fence;
    unsigned readers, available, mine;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "STATUS %s", name);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (strcmp(d->line, "OK FREE") == 0) {
        st.state = DLOCK_FREE;
    } else if (sscanf(d->line, "OK MINE %u %lld %llu", &st.holds, &st.ttl_ms, &fence) == 3) {
        st.state = DLOCK_MINE;
        st.fence = fence;
    } else if (sscanf(d->line, "OK TAKEN %lld", &st.ttl_ms) == 1) {
        st.state = DLOCK_TAKEN;
    } else if (sscanf(d->line, "OK READ %u %u %lld", &readers, &st.holds, &st.ttl_ms) == 3) {
        st.state = DLOCK_READ;
    } else if (sscanf(d->line, "OK WRITE %u %u %lld", &readers, &st.holds, &st.ttl_ms) == 3) {
        st.state = DLOCK_WRITE;
    } else if (sscanf(d->line, "OK SEM %u %u", &available, &mine) == 2) {
        st.state = DLOCK_SEM;
        st.holds = mine;
        st.sem.available = available;
        st.sem.mine = mine;
    } else {
        return DLOCK_EPROTO;
    }
    if (out) *out = st;
    return 0;
}

int dlock_force_unlock(dlock_t *d, const char *name, int *removed) {
    char line[DLOCK_NAME_MAX + 16];
    int n;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "FORCEUNLOCK %s", name);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (sscanf(d->line, "OK %d", &n) != 1) return DLOCK_EPROTO;
    if (removed) *removed = n;
    return 0;
}

int dlock_ping(dlock_t *d) {
    int r = roundtrip(d, "PING");
    return r == 0 && strcmp(d->line, "OK PONG") != 0 ? DLOCK_EPROTO : r;
}

int dlock_info(dlock_t *d, char *buf, size_t len) {
    int r = roundtrip(d, "INFO");
    if (r == 0 && buf != NULL && len > 0)
        snprintf(buf, len, "%s", d->line[2] == ' ' ? d->line + 3 : "");
    return r;
}

/* "-" or a decimal: -1 or its value; -2 when it is neither. */
static long long num_or_dash(const char *s) {
    if (strcmp(s, "-") == 0) return -1;
    if (*s == '\0' || *s == '-') return -2;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return *end != '\0' || errno != 0 ? -2 : v;
}

/* "<total>,host/dpid/pid/uid/count/age,..." into who. 0 or -1. */
static int parse_who(char *w, size_t *total, dlock_who_t *who, size_t *n) {
    char *save = NULL, *part = strtok_r(w, ",", &save);
    long long t = part ? num_or_dash(part) : -2;
    if (t < 0) return -1;
    *total = (size_t)t;
    *n = 0;
    while ((part = strtok_r(NULL, ",", &save)) != NULL) {
        char *f[6], *s2 = NULL;
        int k = 0;
        for (char *p = strtok_r(part, "/", &s2); p && k < 6; p = strtok_r(NULL, "/", &s2))
            f[k++] = p;
        if (k != 6) return -1;
        if (*n == DLOCK_LIST_WHO_MAX) continue;
        dlock_who_t *x = &who[(*n)++];
        snprintf(x->host, sizeof(x->host), "%s", strcmp(f[0], "-") == 0 ? "" : f[0]);
        x->dlockd_pid = num_or_dash(f[1]);
        x->pid = num_or_dash(f[2]);
        x->uid = num_or_dash(f[3]);
        x->count = num_or_dash(f[4]);
        x->age_ms = num_or_dash(f[5]);
        if (x->dlockd_pid < -1 || x->pid < -1 || x->uid < -1 || x->count < -1 || x->age_ms < -1)
            return -1;
    }
    return 0;
}

/* "= <name> <kind> <ttl_ms> <fence> <holders> <waiters> <value>" */
static int parse_entry(char *line, dlock_list_entry_t *e) {
    char *w[8], *save = NULL;
    int k = 0;
    for (char *p = strtok_r(line, " ", &save); p && k < 8; p = strtok_r(NULL, " ", &save))
        w[k++] = p;
    if (k != 8 || strcmp(w[0], "=") != 0 || strlen(w[1]) > DLOCK_NAME_MAX ||
        strlen(w[2]) >= sizeof(e->kind) || strlen(w[7]) > DLOCK_VALUE_MAX)
        return -1;
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "%s", w[1]);
    snprintf(e->kind, sizeof(e->kind), "%s", w[2]);
    char *end;
    e->ttl_ms = strtoll(w[3], &end, 10);
    if (*end != '\0') return -1;
    long long f = num_or_dash(w[4]);
    if (f < -1) return -1;
    e->fence = f > 0 ? (uint64_t)f : 0;
    if (parse_who(w[5], &e->holders_total, e->holders, &e->nholders) != 0 ||
        parse_who(w[6], &e->waiters_total, e->waiters, &e->nwaiters) != 0)
        return -1;
    snprintf(e->value, sizeof(e->value), "%s", strcmp(w[7], "-") == 0 ? "" : w[7]);
    return 0;
}

int dlock_list(dlock_t *d, const char *pattern, uint32_t limit, dlock_list_cb cb, void *data,
               int *more) {
    char line[DLOCK_NAME_MAX + 32];
    if (pattern == NULL) pattern = "*";
    if (!name_ok(pattern) || limit > DLOCK_LIST_MAX) return DLOCK_EARGS;
    if (limit > 0)
        snprintf(line, sizeof(line), "LIST %s %u", pattern, (unsigned)limit);
    else
        snprintf(line, sizeof(line), "LIST %s", pattern);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    unsigned n;
    int m, used = 0;
    if (sscanf(d->line, "OK LIST %u %d%n", &n, &m, &used) != 2 || d->line[used] != '\0')
        return DLOCK_EPROTO;
    if (more) *more = m;
    int stop = 0, bad = 0;
    dlock_list_entry_t *e = malloc(sizeof(*e));
    if (e == NULL) return DLOCK_ENOMEM; /* the lines are left unread: close d */
    for (unsigned i = 0; i < n; i++) {
        r = read_reply(d);
        if (r < 0) {
            free(e);
            return r;
        }
        if (bad || parse_entry(d->line, e) != 0) {
            bad = 1;
            continue;
        }
        if (!stop && cb != NULL) stop = cb(data, e) != 0;
    }
    free(e);
    return bad ? DLOCK_EPROTO : (int)n;
}

/* A leader's value: a word as a name is. */
static int value_ok(const char *value) {
    return value != NULL && name_ok(value);
}

int dlock_elect(dlock_t *d, const char *name, const char *value, uint32_t lease_ms,
                uint64_t *fence) {
    char line[DLOCK_NAME_MAX + DLOCK_VALUE_MAX + 32];
    char undo[DLOCK_NAME_MAX + 16];
    uint64_t f;
    if (!name_ok(name)) return bad_name(name);
    if (!value_ok(value) || lease_ms > 2147483647u) return DLOCK_EARGS;
    int n = snprintf(line, sizeof(line), "ELECT %s %s", name, value);
    if (lease_ms != 0) snprintf(line + n, sizeof(line) - (size_t)n, " %u", lease_ms);
    snprintf(undo, sizeof(undo), "RESIGN %s", name);
    int r = roundtrip_wait(d, line, undo);
    if (r != 0) return r;
    if (strncmp(d->line, "OK ", 3) != 0 || parse_u64(d->line + 3, &f) != 0) return DLOCK_EPROTO;
    if (fence) *fence = f;
    return 0;
}

/* verb NAME answered "OK 0" or "OK 1": RESIGN, UNOBSERVE. */
static int yes_no(dlock_t *d, const char *verb, const char *name, int *was) {
    char line[DLOCK_NAME_MAX + 16];
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s", verb, name);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (strcmp(d->line, "OK 0") != 0 && strcmp(d->line, "OK 1") != 0) return DLOCK_EPROTO;
    if (was) *was = d->line[3] == '1';
    return 0;
}

int dlock_resign(dlock_t *d, const char *name, int *was) {
    return yes_no(d, "RESIGN", name, was);
}

/* verb NAME answered as LEADER: 1 or 0 with the leader, or a negative code. */
static int ask_leader(dlock_t *d, const char *verb, const char *name, uint64_t *fence,
                      char *value, size_t cap) {
    char line[DLOCK_NAME_MAX + 16];
    uint64_t f;
    const char *v;
    if (!name_ok(name)) return bad_name(name);
    snprintf(line, sizeof(line), "%s %s", verb, name);
    int r = roundtrip(d, line);
    if (r != 0) return r;
    if (strncmp(d->line, "OK ", 3) != 0) return DLOCK_EPROTO;
    int led = parse_leader(d->line + 3, &f, &v);
    if (led < 0) return DLOCK_EPROTO;
    if (fence) *fence = f;
    if (value != NULL && cap > 0) snprintf(value, cap, "%s", led ? v : "");
    return led;
}

int dlock_leader(dlock_t *d, const char *name, uint64_t *fence, char *value, size_t cap) {
    return ask_leader(d, "LEADER", name, fence, value, cap);
}

int dlock_observe(dlock_t *d, const char *name, dlock_leader_cb cb, void *data,
                  uint64_t *fence, char *value, size_t cap) {
    if (!name_ok(name)) return bad_name(name);
    observer_t *o = observer_find(d, name);
    int fresh = o == NULL;
    if (fresh && (o = calloc(1, sizeof(*o))) == NULL) return DLOCK_ENOMEM;
    int r = ask_leader(d, "OBSERVE", name, fence, value, cap);
    if (r < 0) {
        if (fresh) free(o);
        return r;
    }
    o->cb = cb;
    o->data = data;
    if (fresh) {
        snprintf(o->name, sizeof(o->name), "%s", name);
        o->next = d->observers;
        d->observers = o;
    }
    return r;
}

int dlock_unobserve(dlock_t *d, const char *name, int *was) {
    int r = yes_no(d, "UNOBSERVE", name, was);
    if (r != 0) return r;
    for (observer_t **p = &d->observers; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->name, name) == 0) {
            observer_t *o = *p;
            *p = o->next;
            free(o);
            break;
        }
    }
    return 0;
}

int dlock_poll(dlock_t *d, int timeout_ms) {
    int events = 0;
    for (;;) {
        int r = take_line(d);
        if (r < 0) return r;
        if (r == 1) {
            if (d->line[0] == '!') {
                on_event(d, d->line);
                events++;
            }
            continue; /* a stray reply line is dropped */
        }
        if (d->closed) return events ? events : DLOCK_ECLOSED;
        r = fill(d, events ? 0 : timeout_ms);
        if (r == DLOCK_ECLOSED) return events ? events : DLOCK_ECLOSED;
        if (r < 0) return r;
        if (r == 0) return events;
        timeout_ms = 0; /* only the first read may wait */
    }
}
