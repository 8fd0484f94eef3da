/* libdlock's conformance adapter (tests/conformance/README.md): a thread per
 * client runs its commands one at a time through the public API and, while
 * idle, polls its descriptor for loss events; cancel is dlock_cancel().
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/c/dlock.h"

#define MAX_CLIENTS 64
#define MAX_HANDLES 256
#define MAX_ARGS (DLOCK_MNAMES_MAX + 16)  /* an mlock of 65 names, and its words */
#define CMD_MAX 16384                      /* bytes in a command line */
#define ID_MAX 64

typedef struct cmd_s {
    struct cmd_s *next;
    char rid[ID_MAX];
    int argc;             /* words after the rid: argv[0] is the command */
    char *argv[MAX_ARGS];
    char buf[CMD_MAX];
} cmd_t;

typedef struct client_s {
    char cid[ID_MAX];
    dlock_t *d;           /* NULL once closed */
    pthread_t thread;
    pthread_mutex_t mu;   /* queue, current */
    cmd_t *head, *tail;
    char current[ID_MAX]; /* the rid running now, "" when idle */
    int stop;
    int wake[2];
    /* Losses told while a command ran that matched no live handle: its own
     * grant's, told with the reply (a 1 ms lease), before the handle is
     * added. Reported once the command is done. The client's thread only. */
    size_t nmissed;
    struct {
        char name[DLOCK_NAME_MAX + 1];
        char reason[16];
    } missed[DLOCK_MNAMES_MAX];
} client_t;

typedef struct handle_s {
    char hid[ID_MAX];
    client_t *c;
    char name[DLOCK_NAME_MAX + 1];
    char kind[16];        /* lock, rlock, wlock, fairlock, sem, elect, mlock */
    uint32_t lease;
    int live;
    size_t mn;            /* mlock: its names, mnames[i] in mbuf */
    const char *mnames[DLOCK_MNAMES_MAX];
    char *mbuf;
} handle_t;

/* An observation: dlock_observe() of name on c, reported as oid. */
typedef struct observation_s {
    char oid[ID_MAX];
    client_t *c;
    char name[DLOCK_NAME_MAX + 1];
} observation_t;

static observation_t observations[MAX_HANDLES];
static int nobservations;
static client_t *clients[MAX_CLIENTS];
static int nclients;
static handle_t handles[MAX_HANDLES];
static int nhandles;
static pthread_mutex_t handles_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&out_mu);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
    va_end(ap);
}

static const char *err_kind(int r) {
    switch (r) {
    case DLOCK_ENAME: return "name";
    case DLOCK_EARGS: return "args";
    case DLOCK_EKIND: return "kind";
    case DLOCK_ENOTHELD: return "notheld";
    case DLOCK_ELIMIT: return "limit";
    case DLOCK_EDENIED: return "denied";
    case DLOCK_EBACKEND: return "backend";
    case DLOCK_ECANCELLED: return "cancelled";
    case DLOCK_ECLOSED:
    case DLOCK_EIO: return "closed";
    case DLOCK_ECONNECT: return "connect";
    default: return "other";
    }
}

/* Every live handle of c with name (any name when NULL) is lost; how many. */
static int lost_handles(client_t *c, const char *name, const char *reason) {
    int n = 0;
    pthread_mutex_lock(&handles_mu);
    for (int i = 0; i < nhandles; i++) {
        handle_t *h = &handles[i];
        int mine = name == NULL || (h->mn == 0 && strcmp(h->name, name) == 0);
        for (size_t j = 0; j < h->mn && !mine; j++) mine = strcmp(h->mnames[j], name) == 0;
        if (h->c == c && h->live && mine) {
            h->live = 0;
            say("* lost %s %s", h->hid, reason);
            n++;
        }
    }
    pthread_mutex_unlock(&handles_mu);
    return n;
}

/* As lost_handles(); a name no handle has yet is kept in c->missed. */
static void lost(client_t *c, const char *name, const char *reason) {
    if (lost_handles(c, name, reason) > 0 || name == NULL) return;
    if (c->nmissed < sizeof(c->missed) / sizeof(c->missed[0])) {
        snprintf(c->missed[c->nmissed].name, sizeof(c->missed[0].name), "%s", name);
        snprintf(c->missed[c->nmissed].reason, sizeof(c->missed[0].reason), "%s", reason);
        c->nmissed++;
    }
}

static void on_lost(dlock_t *d, const char *name, const char *reason, void *data) {
    (void)d;
    lost(data, name, reason);
}

/* The leader callback, on the client's thread: data is the observation. */
static void on_leader(dlock_t *d, const char *name, uint64_t fence, const char *value,
                      void *data) {
    observation_t *o = data;
    (void)d;
    (void)name;
    if (value == NULL) say("* leader %s NONE", o->oid);
    else say("* leader %s %llu %s", o->oid, (unsigned long long)fence, value);
}

static observation_t *observation_find(const char *oid) {
    observation_t *found = NULL;
    pthread_mutex_lock(&handles_mu);
    for (int i = 0; i < nobservations; i++)
        if (strcmp(observations[i].oid, oid) == 0) found = &observations[i];
    pthread_mutex_unlock(&handles_mu);
    return found;
}

static observation_t *observation_add(const char *oid, client_t *c, const char *name) {
    observation_t *o = NULL;
    pthread_mutex_lock(&handles_mu);
    if (nobservations < MAX_HANDLES) {
        o = &observations[nobservations++];
        snprintf(o->oid, sizeof(o->oid), "%s", oid);
        snprintf(o->name, sizeof(o->name), "%s", name);
        o->c = c;
    }
    pthread_mutex_unlock(&handles_mu);
    return o;
}

/* "<rid> ok <fence> <value>" or "<rid> ok NONE" for dlock_leader()'s and
 * dlock_observe()'s answer r. */
static void say_leader(const char *rid, int r, uint64_t fence, const char *value) {
    if (r == 1) say("%s ok %llu %s", rid, (unsigned long long)fence, value);
    else say("%s ok NONE", rid);
}

static handle_t *handle_find(const char *hid) {
    handle_t *found = NULL;
    pthread_mutex_lock(&handles_mu);
    for (int i = 0; i < nhandles; i++)
        if (strcmp(handles[i].hid, hid) == 0) found = &handles[i];
    pthread_mutex_unlock(&handles_mu);
    return found;
}

static void handle_add(const char *hid, client_t *c, const char *name, const char *kind,
                       uint32_t lease) {
    pthread_mutex_lock(&handles_mu);
    handle_t *h = NULL;
    for (int i = 0; i < nhandles; i++)
        if (strcmp(handles[i].hid, hid) == 0) h = &handles[i];
    if (h == NULL && nhandles < MAX_HANDLES) h = &handles[nhandles++];
    if (h != NULL) {
        snprintf(h->hid, sizeof(h->hid), "%s", hid);
        snprintf(h->name, sizeof(h->name), "%s", name);
        snprintf(h->kind, sizeof(h->kind), "%s", kind);
        h->c = c;
        h->lease = lease;
        h->live = 1;
        h->mn = 0;
    }
    pthread_mutex_unlock(&handles_mu);
}

/* An mlock's handle: its n names, copied. */
static void mhandle_add(const char *hid, client_t *c, size_t n, char **names) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += strlen(names[i]) + 1;
    char *buf = malloc(len), *p = buf;
    if (buf == NULL) abort();
    handle_add(hid, c, names[0], "mlock", 0);
    pthread_mutex_lock(&handles_mu);
    handle_t *h = NULL;
    for (int i = 0; i < nhandles; i++)
        if (strcmp(handles[i].hid, hid) == 0) h = &handles[i];
    if (h != NULL) {
        free(h->mbuf);
        h->mbuf = buf;
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen(names[i]) + 1;
            memcpy(p, names[i], l);
            h->mnames[i] = p;
            p += l;
        }
        h->mn = n;
    } else {
        free(buf);
    }
    pthread_mutex_unlock(&handles_mu);
}

/* "<rid> ok <v1> ... <v_n>". */
static void say_list(const char *rid, size_t n, const uint64_t *v) {
    char out[DLOCK_MNAMES_MAX * 21 + ID_MAX + 8];
    int len = snprintf(out, sizeof(out), "%s ok", rid);
    for (size_t i = 0; i < n; i++)
        len += snprintf(out + len, sizeof(out) - (size_t)len, " %llu", (unsigned long long)v[i]);
    say("%s", out);
}

/* A number word; -1 if it is none (or above UINT32_MAX). */
static long long num(const char *w) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(w, &end, 10);
    if (errno || *end || end == w || w[0] == '-' || v > UINT32_MAX) return -1;
    return (long long)v;
}

/* lock's <lease>: ms, maybe with a fraction (a lease below 1 ms). libdlock
 * takes whole ms, so the fraction is rounded up here, as dlock.h asks of a
 * caller: 0.000001 is 1 ms, not 0 (no lease). -1 if it is no such number. */
static long long lease_num(const char *w) {
    const char *dot = strchr(w, '.');
    if (dot == NULL) return num(w);
    char whole[16];
    size_t n = (size_t)(dot - w);
    if (n == 0 || n >= sizeof(whole) || dot[1] == '\0') return -1;
    memcpy(whole, w, n);
    whole[n] = '\0';
    long long v = num(whole);
    int frac = 0;
    for (const char *p = dot + 1; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        frac |= *p != '0';
    }
    return v < 0 || v + frac > UINT32_MAX ? -1 : v + frac;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* lock's <name>: "%" and hex digits are the name's bytes ("%" alone: the
 * empty name), decoded into buf; the word itself otherwise. NULL if the
 * hex is bad or does not fit. */
static const char *name_arg(const char *w, char *buf, size_t cap) {
    if (w[0] != '%') return w;
    size_t n = strlen(w + 1) / 2;
    if (strlen(w + 1) % 2 != 0 || n >= cap) return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(w[1 + 2 * i]), lo = hex_digit(w[2 + 2 * i]);
        if (hi < 0 || lo < 0) return NULL;
        buf[i] = (char)(hi * 16 + lo);
    }
    buf[n] = '\0';
    return buf;
}

typedef int (*take_fn)(dlock_t *, const char *, uint32_t, uint64_t *, uint32_t *);

static take_fn take_of(const char *kind) {
    if (strcmp(kind, "rlock") == 0) return dlock_rlock;
    if (strcmp(kind, "wlock") == 0) return dlock_wlock;
    if (strcmp(kind, "fairlock") == 0) return dlock_fairlock;
    return dlock_lock;
}

/* The blocking client serves one call at a time: the tasks take their
 * turns one after another on the client's thread. */
static int contend(client_t *c, const char *rid, int tasks, int names, int rounds,
                   const char *prefix) {
    uint64_t last[64] = {0};
    int holder[64], grants = 0, overlaps = 0, nonrising = 0;
    if (names < 1 || names > 64) return DLOCK_EARGS;
    for (int i = 0; i < names; i++) holder[i] = -1;
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < tasks; t++) {
            char name[DLOCK_NAME_MAX + 16];
            int k = (t + r) % names;
            uint64_t fence;
            snprintf(name, sizeof(name), "%s%d", prefix, k);
            int e = dlock_lock(c->d, name, 0, &fence, NULL);
            if (e != 0) return e;
            grants++;
            if (holder[k] != -1) overlaps++;
            if (fence <= last[k]) nonrising++;
            holder[k] = t;
            last[k] = fence;
            holder[k] = -1;
            if ((e = dlock_unlock(c->d, name, NULL)) != 0) return e;
        }
    }
    say("%s ok %d %d %d", rid, grants, overlaps, nonrising);
    return 0;
}

static void status(client_t *c, const char *rid, const char *name) {
    dlock_status_t st;
    int r = dlock_status(c->d, name, &st);
    if (r != 0) {
        say("%s err %s %s", rid, err_kind(r), dlock_strerror(r));
        return;
    }
    switch (st.state) {
    case DLOCK_FREE: say("%s ok FREE", rid); break;
    case DLOCK_MINE:
        say("%s ok MINE %u %lld %llu", rid, st.holds, st.ttl_ms, (unsigned long long)st.fence);
        break;
    case DLOCK_TAKEN: say("%s ok TAKEN %lld", rid, st.ttl_ms); break;
    case DLOCK_READ:
    case DLOCK_WRITE: {
        /* dlock_status_t has no readers: dlock.h points at the raw reply. */
        char line[DLOCK_NAME_MAX + 16], reply[DLOCK_LINE_MAX];
        unsigned readers = 1;
        snprintf(line, sizeof(line), "STATUS %s", name);
        if (st.state == DLOCK_READ && dlock_request(c->d, line, reply, sizeof(reply)) == 0)
            sscanf(reply, "OK READ %u", &readers);
        say("%s ok %s %u %u %lld", rid, st.state == DLOCK_READ ? "READ" : "WRITE", readers,
            st.holds, st.ttl_ms);
        break;
    }
    case DLOCK_SEM: say("%s ok SEM %u %u", rid, st.sem.available, st.sem.mine); break;
    }
}

/* Appends a listed entry's four words to the answer being written. */
static int on_list_entry(void *data, const dlock_list_entry_t *e) {
    FILE *f = data;
    fprintf(f, " %s %s ", e->name, e->kind);
    if (e->fence == 0)
        fputs("-", f);
    else
        fprintf(f, "%llu", (unsigned long long)e->fence);
    fprintf(f, " %zu", e->holders_total);
    return 0;
}

/* list: dlock_list()'s entries, in one answer. dlock_list() takes 0 as
 * "dlockd's default", so the runner's 0 is refused here (it is no limit)
 * and its "-" becomes 0. */
static int list(client_t *c, const char *rid, const char *pattern, const char *limit) {
    long long lim = strcmp(limit, "-") == 0 ? 0 : num(limit);
    if (lim < 0 || (lim == 0 && strcmp(limit, "-") != 0)) return DLOCK_EARGS;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) return DLOCK_ENOMEM;
    int more = 0;
    int r = dlock_list(c->d, pattern, (uint32_t)lim, on_list_entry, f, &more);
    fclose(f);
    if (r >= 0) say("%s ok %d %d%s", rid, r, more, buf);
    free(buf);
    return r < 0 ? r : 0;
}

/* Runs one command on c's thread; answers it. */
static void run(client_t *c, cmd_t *m) {
    const char *rid = m->rid, *op = m->argv[0];
    char **a = m->argv + 1;
    int n = m->argc - 1, r = 0;
    uint64_t fence = 0;
    uint32_t holds = 0;
    handle_t *h = NULL;

    if (strcmp(op, "reenter") == 0 || strcmp(op, "unlock") == 0 || strcmp(op, "renew") == 0 ||
        strcmp(op, "release") == 0 || strcmp(op, "resign") == 0 || strcmp(op, "munlock") == 0) {
        h = handle_find(a[0]);
    }
    if (c->d == NULL) {
        say("%s err closed the client is closed", rid);
        return;
    }
    if ((strcmp(op, "lock") == 0 || strcmp(op, "rlock") == 0 || strcmp(op, "wlock") == 0 ||
         strcmp(op, "fairlock") == 0) && n == 4) {
        char nbuf[2 * DLOCK_NAME_MAX];
        const char *name = name_arg(a[2], nbuf, sizeof(nbuf));
        long long lease = lease_num(a[3]);
        if (lease < 0 || name == NULL) goto bad_args;
        r = take_of(op)(c->d, name, (uint32_t)lease, &fence, &holds);
        if (r == 0) handle_add(a[1], c, name, op, (uint32_t)lease);
    } else if (strcmp(op, "trylock") == 0 && n == 5) {
        long long wait = num(a[3]), lease = num(a[4]);
        if (wait < 0 || lease < 0) goto bad_args;
        r = dlock_trylock(c->d, a[2], (uint32_t)wait, (uint32_t)lease, &fence, &holds, NULL);
        if (r == DLOCK_ETIMEOUT) {
            say("%s timeout", rid);
            return;
        }
        if (r == 0) handle_add(a[1], c, a[2], "lock", (uint32_t)lease);
    } else if ((strcmp(op, "mlock") == 0 && n >= 3) || (strcmp(op, "trymlock") == 0 && n >= 4)) {
        int try = op[0] == 't';
        long long wait = try ? num(a[2]) : -1, lease = num(a[2 + try]);
        size_t mn = (size_t)(n - 3 - try);
        const char *names[MAX_ARGS];
        for (size_t i = 0; i < mn; i++) names[i] = a[3 + try + i];
        uint64_t fences[DLOCK_MNAMES_MAX];
        long long ttl;
        if ((try && wait < 0) || lease < 0) goto bad_args;
        if (try)
            r = dlock_trymlock(c->d, mn, names, (uint32_t)wait, (uint32_t)lease, fences, &ttl);
        else
            r = dlock_mlock(c->d, mn, names, (uint32_t)lease, fences);
        if (r == DLOCK_ETIMEOUT) {
            say("%s timeout", rid);
            return;
        }
        if (r == 0) {
            mhandle_add(a[1], c, mn, a + 3 + try);
            say_list(rid, mn, fences);
            return;
        }
    } else if (strcmp(op, "munlock") == 0 && h != NULL && h->mn > 0) {
        uint32_t left[DLOCK_MNAMES_MAX];
        uint64_t out[DLOCK_MNAMES_MAX];
        r = dlock_munlock(c->d, h->mn, h->mnames, left);
        if (r == DLOCK_ENOTHELD) {
            /* One is gone (lost): MUNLOCK released nothing, so each name
             * still held goes on its own (dlock.h says so). */
            r = 0;
            for (size_t i = 0; r == 0 && i < h->mn; i++) {
                int u = dlock_unlock(c->d, h->mnames[i], &left[i]);
                if (u == DLOCK_ENOTHELD) left[i] = 0;
                else r = u;
            }
        }
        if (r == 0) {
            h->live = 0;
            for (size_t i = 0; i < h->mn; i++) out[i] = left[i];
            say_list(rid, h->mn, out);
            return;
        }
    } else if (strcmp(op, "reenter") == 0 && h != NULL) {
        r = take_of(h->kind)(c->d, h->name, h->lease, &fence, &holds);
    } else if (strcmp(op, "unlock") == 0 && h != NULL) {
        if (strcmp(h->kind, "rlock") == 0)
            r = dlock_runlock(c->d, h->name, &holds);
        else if (strcmp(h->kind, "wlock") == 0)
            r = dlock_wunlock(c->d, h->name, &holds);
        else
            r = dlock_unlock(c->d, h->name, &holds);
        if (r == 0) {
            if (holds == 0) h->live = 0;
            say("%s ok %u", rid, holds);
            return;
        }
    } else if (strcmp(op, "renew") == 0 && h != NULL && n == 2) {
        long long lease = num(a[1]), ttl = 0;
        if (lease < 0) goto bad_args;
        if ((r = dlock_renew(c->d, h->name, (uint32_t)lease, &ttl)) == 0) {
            say("%s ok %lld", rid, ttl);
            return;
        }
    } else if (strcmp(op, "release") == 0 && h != NULL && n == 2) {
        long long permits = num(a[1]);
        if (permits < 0) goto bad_args;
        if ((r = dlock_release(c->d, h->name, (uint32_t)permits, &holds)) == 0) {
            if (holds == 0) h->live = 0;
            say("%s ok %u", rid, holds);
            return;
        }
    } else if (strcmp(op, "seminit") == 0 && n == 3) {
        long long permits = num(a[2]);
        int set = 0;
        if (permits < 0) goto bad_args;
        if ((r = dlock_seminit(c->d, a[1], (uint32_t)permits, &set)) == 0) {
            say("%s ok %d", rid, set);
            return;
        }
    } else if (strcmp(op, "acquire") == 0 && n == 5) {
        long long permits = num(a[3]), lease = num(a[4]);
        if (permits < 0 || lease < 0) goto bad_args;
        r = dlock_acquire(c->d, a[2], (uint32_t)permits, (uint32_t)lease, &holds);
        if (r == 0) {
            handle_add(a[1], c, a[2], "sem", (uint32_t)lease);
            say("%s ok %u", rid, holds);
            return;
        }
    } else if (strcmp(op, "latchset") == 0 && n == 3) {
        long long count = num(a[2]);
        int set = 0;
        if (count < 0) goto bad_args;
        if ((r = dlock_latchset(c->d, a[1], (uint32_t)count, &set)) == 0) {
            say("%s ok %d", rid, set);
            return;
        }
    } else if ((strcmp(op, "countdown") == 0 || strcmp(op, "latchcount") == 0) && n == 2) {
        uint32_t count = 0;
        r = op[0] == 'c' ? dlock_countdown(c->d, a[1], &count)
                         : dlock_latchcount(c->d, a[1], &count);
        if (r == 0) {
            say("%s ok %u", rid, count);
            return;
        }
    } else if ((strcmp(op, "await") == 0 && n == 2) || (strcmp(op, "tryawait") == 0 && n == 3)) {
        uint32_t count = 0;
        if (n == 3) {
            long long wait = num(a[2]);
            if (wait < 0) goto bad_args;
            r = dlock_tryawait(c->d, a[1], (uint32_t)wait, &count);
        } else {
            r = dlock_await(c->d, a[1]);
        }
        if (r == DLOCK_ETIMEOUT) {
            say("%s timeout %u", rid, count);
            return;
        }
        if (r == 0) {
            say("%s ok", rid);
            return;
        }
    } else if (strcmp(op, "elect") == 0 && n == 5) {
        long long lease = num(a[4]);
        if (lease < 0 || lease > 2147483647) goto bad_args;
        r = dlock_elect(c->d, a[2], a[3], (uint32_t)lease, &fence);
        if (r == 0) {
            handle_add(a[1], c, a[2], "elect", (uint32_t)lease);
            say("%s ok %llu", rid, (unsigned long long)fence);
            return;
        }
    } else if (strcmp(op, "resign") == 0 && h != NULL) {
        int was = 0;
        if ((r = dlock_resign(c->d, h->name, &was)) == 0) {
            h->live = 0;
            say("%s ok %d", rid, was);
            return;
        }
    } else if (strcmp(op, "leader") == 0 && n == 2) {
        char value[DLOCK_VALUE_MAX + 1];
        if ((r = dlock_leader(c->d, a[1], &fence, value, sizeof(value))) >= 0) {
            say_leader(rid, r, fence, value);
            return;
        }
    } else if (strcmp(op, "observe") == 0 && n == 3) {
        char value[DLOCK_VALUE_MAX + 1];
        observation_t *o = observation_add(a[1], c, a[2]);
        if (o == NULL) {
            say("%s err other too many observations", rid);
            return;
        }
        if ((r = dlock_observe(c->d, a[2], on_leader, o, &fence, value, sizeof(value))) >= 0) {
            say_leader(rid, r, fence, value);
            return;
        }
    } else if (strcmp(op, "unobserve") == 0 && n == 1) {
        observation_t *o = observation_find(a[0]);
        if (o == NULL) {
            say("%s err other no observation %s", rid, a[0]);
            return;
        }
        if ((r = dlock_unobserve(c->d, o->name, NULL)) == 0) {
            say("%s ok", rid);
            return;
        }
    } else if (strcmp(op, "status") == 0 && n == 2) {
        status(c, rid, a[1]);
        return;
    } else if (strcmp(op, "ping") == 0) {
        if ((r = dlock_ping(c->d)) == 0) {
            say("%s ok", rid);
            return;
        }
    } else if (strcmp(op, "close") == 0) {
        dlock_close(c->d);
        c->d = NULL;
        lost(c, NULL, "closed");
        say("%s ok", rid);
        return;
    } else if (strcmp(op, "list") == 0 && n == 3) {
        if ((r = list(c, rid, a[1], a[2])) == 0) return;
    } else if (strcmp(op, "contend") == 0 && n == 5) {
        long long tasks = num(a[1]), names = num(a[2]), rounds = num(a[3]);
        if (tasks < 0 || names < 0 || rounds < 0) goto bad_args;
        if ((r = contend(c, rid, (int)tasks, (int)names, (int)rounds, a[4])) == 0) return;
    } else if (h == NULL && (strcmp(op, "reenter") == 0 || strcmp(op, "unlock") == 0 ||
                             strcmp(op, "renew") == 0 || strcmp(op, "release") == 0 ||
                             strcmp(op, "resign") == 0 || strcmp(op, "munlock") == 0)) {
        say("%s err notheld no handle %s", rid, a[0]);
        return;
    } else {
        say("%s err other unknown command or arguments: %s", rid, op);
        return;
    }
    if (r == 0) {
        say("%s ok %llu %u", rid, (unsigned long long)fence, holds);
        return;
    }
    say("%s err %s %s", rid, err_kind(r), dlock_strerror(r));
    if (r == DLOCK_ECLOSED || r == DLOCK_EIO) lost(c, NULL, "closed");
    return;
bad_args:
    say("%s err args a number out of range", rid);
}

/* While idle: wait for a command, reporting the connection's events. */
static void idle(client_t *c) {
    struct pollfd p[2] = {{.fd = c->wake[0], .events = POLLIN},
                          {.fd = c->d ? dlock_fd(c->d) : -1, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) return;
    if (p[0].revents) {
        char buf[64];
        ssize_t n = read(c->wake[0], buf, sizeof(buf));
        (void)n;
    }
    if (c->d != NULL && p[1].revents && dlock_poll(c->d, 0) == DLOCK_ECLOSED) {
        lost(c, NULL, "closed");
        dlock_close(c->d);
        c->d = NULL;
    }
}

static void *client_main(void *arg) {
    client_t *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        cmd_t *m = c->head;
        if (m != NULL) {
            c->head = m->next;
            if (c->head == NULL) c->tail = NULL;
            snprintf(c->current, sizeof(c->current), "%s", m->rid);
        }
        int stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (m == NULL) {
            if (stop) return NULL;
            idle(c);
            continue;
        }
        c->nmissed = 0;
        run(c, m);
        free(m);
        for (size_t i = 0; i < c->nmissed; i++)
            lost_handles(c, c->missed[i].name, c->missed[i].reason);
        c->nmissed = 0;
        pthread_mutex_lock(&c->mu);
        c->current[0] = '\0';
        pthread_mutex_unlock(&c->mu);
    }
}

static void wake(client_t *c) {
    ssize_t n = write(c->wake[1], "x", 1);
    (void)n;
}

static void enqueue(client_t *c, cmd_t *m) {
    pthread_mutex_lock(&c->mu);
    m->next = NULL;
    if (c->tail) c->tail->next = m;
    else c->head = m;
    c->tail = m;
    pthread_mutex_unlock(&c->mu);
    wake(c);
}

static client_t *client_find(const char *cid) {
    for (int i = 0; i < nclients; i++)
        if (strcmp(clients[i]->cid, cid) == 0) return clients[i];
    return NULL;
}

/* cancel rid: dropped from its client's queue, or dlock_cancel() while it runs. */
static void cancel(const char *rid) {
    for (int i = 0; i < nclients; i++) {
        client_t *c = clients[i];
        pthread_mutex_lock(&c->mu);
        for (cmd_t **p = &c->head; *p; p = &(*p)->next) {
            if (strcmp((*p)->rid, rid) == 0) {
                cmd_t *m = *p;
                *p = m->next;
                if (c->tail == m) {
                    c->tail = NULL;
                    for (cmd_t *q = c->head; q; q = q->next) c->tail = q;
                }
                pthread_mutex_unlock(&c->mu);
                say("%s err cancelled dropped before it ran", rid);
                free(m);
                return;
            }
        }
        pthread_mutex_unlock(&c->mu);
        /* Running, or about to: retry until its wait is there to cancel. */
        for (;;) {
            pthread_mutex_lock(&c->mu);
            int running = strcmp(c->current, rid) == 0;
            int done = running && c->d != NULL && dlock_cancel(c->d) == 1;
            pthread_mutex_unlock(&c->mu);
            if (!running || done) break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
}

static void connect_client(const char *rid, const char *cid, const char *path) {
    int err = 0;
    dlock_t *d = dlock_connect(strcmp(path, "-") == 0 ? NULL : path, &err);
    if (d == NULL) {
        say("%s err %s %s", rid, err_kind(err), dlock_strerror(err));
        return;
    }
    if (nclients == MAX_CLIENTS) {
        dlock_close(d);
        say("%s err other too many clients", rid);
        return;
    }
    client_t *c = calloc(1, sizeof(*c));
    if (c == NULL || pipe(c->wake) != 0) abort();
    snprintf(c->cid, sizeof(c->cid), "%s", cid);
    c->d = d;
    pthread_mutex_init(&c->mu, NULL);
    dlock_set_lost_cb(d, on_lost, c);
    pthread_create(&c->thread, NULL, client_main, c);
    clients[nclients++] = c;
    say("%s ok", rid);
}

int main(void) {
    static char line[CMD_MAX];
    say("* ready");
    while (fgets(line, sizeof(line), stdin) != NULL) {
        cmd_t *m = calloc(1, sizeof(*m));
        if (m == NULL) abort();
        line[strcspn(line, "\n")] = '\0';
        snprintf(m->buf, sizeof(m->buf), "%s", line);
        char *save = NULL, *w = strtok_r(m->buf, " ", &save);
        if (w == NULL) {
            free(m);
            continue;
        }
        snprintf(m->rid, sizeof(m->rid), "%s", w);
        while ((w = strtok_r(NULL, " ", &save)) != NULL && m->argc < MAX_ARGS)
            m->argv[m->argc++] = w;
        const char *op = m->argc ? m->argv[0] : "";
        client_t *c = NULL;
        if (strcmp(op, "connect") == 0 && m->argc == 3) {
            connect_client(m->rid, m->argv[1], m->argv[2]);
        } else if (strcmp(op, "cancel") == 0 && m->argc == 2) {
            say("%s ok", m->rid);
            cancel(m->argv[1]);
        } else if (m->argc == 2 && strcmp(op, "unobserve") == 0) {
            observation_t *o = observation_find(m->argv[1]);
            if (o != NULL) {
                enqueue(o->c, m);
                continue;
            }
            say("%s err other no observation %s", m->rid, m->argv[1]);
        } else if (m->argc >= 2 && (strcmp(op, "reenter") == 0 || strcmp(op, "unlock") == 0 ||
                                    strcmp(op, "renew") == 0 || strcmp(op, "release") == 0 ||
                                    strcmp(op, "resign") == 0 || strcmp(op, "munlock") == 0)) {
            handle_t *h = handle_find(m->argv[1]);
            if (h != NULL) {
                enqueue(h->c, m);
                continue;
            }
            say("%s err notheld no handle %s", m->rid, m->argv[1]);
        } else if (m->argc >= 2 && (c = client_find(m->argv[1])) != NULL) {
            enqueue(c, m);
            continue;
        } else {
            say("%s err other unknown command, or no such client", m->rid);
        }
        free(m);
    }
    for (int i = 0; i < nclients; i++) {
        client_t *c = clients[i];
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_mutex_unlock(&c->mu);
        wake(c);
        pthread_join(c->thread, NULL);
        if (c->d) dlock_close(c->d);
    }
    return 0;
}
