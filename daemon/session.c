/* Client connections: one lock owner each; untagged requests one at a time, tagged ones at once.
 * SPDX-License-Identifier: MIT */
#include "session.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/access.h"
#include "daemon/listfmt.h"
#include "daemon/listing.h"
#include "daemon/log.h"
#include "daemon/reply.h"
#include "daemon/util/buf.h"
#include "daemon/util/hmap.h"
#include "daemon/util/statefmt.h"
#include "daemon/util/util.h"
#include "proto/proto.h"

typedef enum {
    SESSION_READY = 0, /* parsing and answering requests */
    SESSION_WAITING,   /* an untagged request is in progress; input is kept */
    SESSION_DRAINING,  /* QUIT or TOOLONG: nothing more is read; waits are
                          withdrawn, the rest answered, replies flushed,
                          then it closes */
    SESSION_CLOSING    /* uv_close() called; the owner goes in on_close */
} session_state_t;

typedef struct session_s session_t;
typedef struct call_s call_t;

/* A name the session's calls take turns on, and those calls in the order
 * they came, a turn each. Its key is the calls' order (verb_order_t, one
 * byte) and the name: those that change the lock and those that change
 * what is observed take turns apart. */
typedef struct name_line_s {
    hmap_node_t node;          /* in s->lines */
    TAILQ_HEAD(turns_s, turn_s) turns;
    char key[];                /* a copy: the calls that named it come and go */
} name_line_t;

/* A call's place in the line of one of its names. */
typedef struct turn_s {
    call_t *c;
    name_line_t *line;
    TAILQ_ENTRY(turn_s) link;
} turn_t;

/* One request in progress: the untagged one, or a tagged one. It is the
 * lock manager's call (lockmgr_request), and LIST's. */
struct call_s {
    session_t *s;
    TAILQ_ENTRY(call_s) link;  /* s->calls, in the order they came */
    proto_request_t req;       /* what it asks, its tag and names */
    int started;               /* in the lock manager or listing; else it
                                  waits for an earlier call on its names */
    int waits;                 /* it may wait for a holder */
    hmap_node_t by_tag;        /* in s->tags, if tagged */
    int withdrawn;             /* drain() asked the lock manager to cancel it */
    listing_t *listing;        /* LIST in flight */
    turn_t *turns;             /* its places in its names' lines, if it takes turns: */
    turn_t one;                /* ... here for a request of one name */
    unsigned nturns;
    uint64_t start_seq;        /* started as the ss->start_seq-th of all */
    uint64_t started_ms;       /* ... at this loop time */
    int restart;               /* handed over started: asked again at resume */
};

/* Which of a connection's calls on one name take turns: those that change
 * its lock, and, apart from them, those that change what the connection
 * observes of it (an UNOBSERVE must find the OBSERVE before it done). */
typedef enum {
    ORDER_NONE = 0, /* only looks: starts at once */
    ORDER_LOCK,
    ORDER_OBSERVE
} verb_order_t;

/* What the session does with each command: answer it at once (now), or
 * make it a call that starts when its turn comes (start); a lock
 * request's verb, mode and op; its lockmgr.h LOCK_WORD_* flags: which
 * calls it takes turns with on its names (then it starts after the
 * connection's earlier such calls on any of them are answered), whether
 * it gives back (a release passes a wait, below), whether it waits, and
 * its grant's form. The lock kinds' commands come from their own tables
 * (lockmgr_word); the session's own are below (own_verbs). */
typedef struct verb_s {
    void (*now)(session_t *s, const proto_request_t *req);
    void (*start)(call_t *c);
    lock_verb_t verb;
    lock_mode_t mode;
    uint8_t op;
    unsigned flags;
} verb_t;

struct session_s {
    uv_pipe_t *pipe;           /* the client's socket, admitted by server.c; data
                                  points here */
    sessions_t *ss;
    uint64_t id;               /* unique in this daemon's life */
    lock_owner_t *owner;       /* this connection as a lock owner */
    session_state_t state;
    proto_cmd_t cmd;           /* the request being answered, for the metrics */

    /* input */
    proto_parser_t parser;
    buf_t in;                  /* bytes read while a request was in flight */
    int paused;                /* reading stopped because in is full */
    int eof;                   /* the peer shut its side: finish, then close */

    /* output */
    buf_t out;                 /* replies not yet handed to libuv */
    buf_t wbuf;                /* bytes of the uv_write in flight */
    uv_write_t wreq;
    int writing;

    /* peer credentials, from SO_PEERCRED */
    pid_t pid;
    uid_t uid;
    gid_t gid;
    access_peer_t peer;        /* uid and groups, as access rules see them */
    access_view_t view;        /* the rules that apply to it, its last decision */
    session_leave_cb leave;    /* its admission ends with it (server.c) */
    void *leave_data;

    /* what it did with locks, for the line that says it is gone */
    uint64_t connected_ms;     /* loop time of the accept */
    uint64_t grants;           /* LOCK and TRYLOCK answered OK */
    uint64_t timeouts;         /* TRYLOCKs with a wait that timed out */
    TAILQ_HEAD(, call_s) calls; /* requests in progress, oldest first */
    hmap_t lines;              /* ... the names they take turns on (name_line_t);
                                  buckets made by the first such call */
    hmap_t tags;               /* ... the tagged ones by tag; buckets made by
                                  the first */
    size_t nparked;            /* ... those not started yet */
    call_t *untagged;          /* ... the untagged one among them */
    size_t ntagged;            /* ... tagged (max_inflight) */
    int unpark;                /* a call ended: calls behind it may start */
    int quitting;              /* QUIT: BYE once every call is answered ... */
    char quit_tag[PROTO_TAG_MAX + 1]; /* ... tagged with QUIT's tag */
    uint8_t quit_tag_len;
    int cancel_checked;        /* the line after the untagged call was seen */
    int cancelled;             /* ... was CANCEL, and withdrew it */

    /* lists */
    LIST_ENTRY(session_s) all;          /* all sessions */
    TAILQ_ENTRY(session_s) dirty_link;  /* output or input to handle */
    int dirty;
    uint64_t dirty_round;               /* the check round it was marked in */
    LIST_ENTRY(session_s) deaf_link;    /* not reading while a request waits */
    int deaf;
};

struct sessions_s {
    uv_loop_t *loop;
    const conf_t *conf;
    lockmgr_t *locks;
    uv_check_t flusher;        /* runs after every poll: flushes dirty sessions */
    uv_idle_t keepalive;       /* active while dirty sessions exist */
    uv_timer_t hangups;        /* looks for peers gone while we do not read */
    LIST_HEAD(, session_s) deaf; /* sessions not reading with a request waiting */
    LIST_HEAD(, session_s) all;
    TAILQ_HEAD(, session_s) dirty;
    uint64_t round;            /* check rounds: a session marked during one waits */
    uint64_t next_id;
    uint64_t start_seq;        /* calls started, all connections */
    int frozen;                /* a hand-over: nothing read, nothing started */
    uint64_t started_ms;
    sessions_stats_t stats;
    /* failures a client can repeat at will: said once, then summed up */
    log_once_t overflow_log;   /* closed past max_output */
    access_log_t deny_log;     /* ERR DENIED: a line per uid and rule a minute */
    void (*closed_cb)(void *data);
    void *closed_data;
    int closing_handles;       /* sessions_close_all: handles not yet closed */
    listing_ring_t lost;       /* the latest !LOST events, for the board */
    verb_t verbs[PROTO_CMD_COUNT]; /* by command: own_verbs and every kind's words */
};

static const verb_t *verb_of(const session_t *s, proto_cmd_t cmd) {
    return &s->ss->verbs[cmd];
}

/* Which of the connection's calls v's call takes turns with. */
static verb_order_t order_of(const verb_t *v) {
    return v->flags & LOCK_WORD_TURNS      ? ORDER_LOCK
           : v->flags & LOCK_WORD_OBSERVES ? ORDER_OBSERVE
                                           : ORDER_NONE;
}

/* Stays valid only inside one on_read: every read is consumed at once. */
static char read_chunk[SESSION_READ_CHUNK];

static void session_close(session_t *s);
static void on_idle(uv_idle_t *handle);
static void deaf_add(session_t *s);
static size_t handle_input(session_t *s, const char *data, size_t len);

static void mark_dirty(session_t *s) {
    sessions_t *ss = s->ss;
    if (s->dirty || s->state == SESSION_CLOSING) return;
    if (TAILQ_EMPTY(&ss->dirty)) uv_idle_start(&ss->keepalive, on_idle);
    s->dirty = 1;
    s->dirty_round = ss->round;
    TAILQ_INSERT_TAIL(&ss->dirty, s, dirty_link);
}

static void unmark_dirty(session_t *s) {
    sessions_t *ss = s->ss;
    if (!s->dirty) return;
    TAILQ_REMOVE(&ss->dirty, s, dirty_link);
    s->dirty = 0;
}

/* Queues a reply (one line, or LIST's block) to the request to, with its
 * tag first if it has one (to NULL: an event); closes the connection past
 * max_output. */
static void send_tagged(session_t *s, const char *to_tag, size_t to_len, const char *line,
                        size_t len) {
    char tag[PROTO_TAG_MAX + 3];
    int tlen = 0;
    if (s->state == SESSION_CLOSING) return;
    if (to_len > 0 && (tlen = proto_reply_tag(tag, sizeof(tag), to_tag, to_len)) < 0)
        tlen = 0; /* cannot be: a tag fits */
    if (s->out.len + s->wbuf.len + (size_t)tlen + len > s->ss->conf->max_output) {
        log_once_restart_if_quiet(&s->ss->overflow_log);
        log_once(&s->ss->overflow_log, CONF_LOG_WARN,
                 "client %llu (pid %d uid %u): %zu bytes of replies unread, closing",
                 (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid,
                 s->out.len + s->wbuf.len);
        s->ss->stats.output_overflows++;
        session_close(s);
        return;
    }
    if ((tlen > 0 && buf_append(&s->out, tag, (size_t)tlen) != 0) ||
        buf_append(&s->out, line, len) != 0) {
        log_error("client %llu: out of memory, closing", (unsigned long long)s->id);
        session_close(s);
        return;
    }
    mark_dirty(s);
}

static void send_reply(session_t *s, const proto_request_t *to, const char *line, size_t len) {
    if (to == NULL) send_tagged(s, NULL, 0, line, len);
    else send_tagged(s, to->tag, to->tag_len, line, len);
}

static void send_line(session_t *s, const char *line, size_t len) {
    send_reply(s, NULL, line, len);
}

static void count_reply(session_t *s, int result) {
    s->ss->stats.replies[s->cmd][result]++;
}

static void send_error(session_t *s, const proto_request_t *to, proto_err_t err,
                       const char *detail) {
    char line[PROTO_REPLY_MAX];
    int n = proto_reply_error(line, PROTO_ERROR_MAX, err, detail);
    s->ss->stats.errors++;
    count_reply(s, SESSION_RESULT_ERR(err));
    if (n > 0) send_reply(s, to, line, (size_t)n);
}

/* INFO: the daemon's counters, then every kind's own (lockmgr_kind_stats),
 * then the peer's credentials, on one line. */
static void send_info(session_t *s, const proto_request_t *to) {
    count_reply(s, SESSION_RESULT_OK);
    sessions_stats_t st;
    lockmgr_stats_t ls;
    lock_stat_t ks[LOCKMGR_KIND_STATS_MAX];
    char text[2048], line[1024];

    sessions_stats(s->ss, &st);
    lockmgr_stats(s->ss->locks, &ls);
    size_t nks = lockmgr_kind_stats(s->ss->locks, ks, LOCKMGR_KIND_STATS_MAX);
    int m = snprintf(text, sizeof(text),
        "version=%s uptime_s=%llu connections=%llu locks_held=%llu waiters=%llu "
        "redis=%s backend=%s redis_nodes=%u redis_nodes_up=%u redis_down=%s "
        "connections_total=%llu rejected=%llu requests=%llu errors=%llu "
        "output_overflows=%llu grants=%llu reentries=%llu releases=%llu "
        "timeouts=%llu cancelled=%llu lost=%llu renewals=%llu backend_errors=%llu",
        DLOCKD_VERSION, (unsigned long long)st.uptime_s,
        (unsigned long long)st.connections, (unsigned long long)ls.locks_held,
        (unsigned long long)ls.waiters, ls.backend_up ? "up" : "down", ls.backend,
        ls.nodes, ls.nodes_up, ls.nodes_down,
        (unsigned long long)st.connections_total, (unsigned long long)st.rejected,
        (unsigned long long)st.requests, (unsigned long long)st.errors,
        (unsigned long long)st.output_overflows, (unsigned long long)ls.grants,
        (unsigned long long)ls.reentries, (unsigned long long)ls.releases,
        (unsigned long long)ls.timeouts, (unsigned long long)ls.cancelled,
        (unsigned long long)ls.lost,
        (unsigned long long)ls.renewals, (unsigned long long)ls.backend_errors);
    size_t len = m < 0 ? 0 : (size_t)m < sizeof(text) ? (size_t)m : sizeof(text) - 1;
    for (size_t i = 0; i < nks && len < sizeof(text) - 1; i++) {
        m = snprintf(text + len, sizeof(text) - len, " %s=%llu", ks[i].key,
                     (unsigned long long)ks[i].value);
        len = m < 0 ? len : len + (size_t)m < sizeof(text) ? len + (size_t)m : sizeof(text) - 1;
    }
    m = snprintf(text + len, sizeof(text) - len,
                 " pid=%ld upgrades=%llu upgrade_failures=%llu upgrade_ms=%llu "
                 "upgrade_state_bytes=%llu",
                 (long)getpid(), (unsigned long long)st.upgrades,
                 (unsigned long long)st.upgrade_failures, (unsigned long long)st.upgrade_ms,
                 (unsigned long long)st.upgrade_state_bytes);
    len = m < 0 ? len : len + (size_t)m < sizeof(text) ? len + (size_t)m : sizeof(text) - 1;
    snprintf(text + len, sizeof(text) - len, " peer_pid=%d peer_uid=%u peer_gid=%u metrics=%s",
             (int)s->pid, (unsigned)s->uid, (unsigned)s->gid,
             s->ss->conf->metrics[0] ? s->ss->conf->metrics : "-");
    /* cut, if ever, as one format of it was */
    int n = proto_reply_ok(line, sizeof(line), "%s", text);
    if (n > 0) send_reply(s, to, line, (size_t)n);
}

/* CLIENTS: who is connected, with peer credentials, for admins only. One
 * line: "OK clients=N shown=M" and then one id:pid:uid:gid:locks:waiting
 * entry per client, newest first, at most SESSION_CLIENTS_SHOWN. A
 * session being closed (until its on_close) is gone already: its owner
 * may be dropped, or never made (no memory at accept). */
static void send_clients(session_t *s, const proto_request_t *to) {
    sessions_t *ss = s->ss;
    size_t cap = 64 + (size_t)SESSION_CLIENTS_SHOWN * 80;
    char *line = malloc(cap);
    if (line == NULL) {
        send_error(s, to, PROTO_ERR_LIMIT, "out of memory");
        return;
    }
    size_t open = 0, shown = 0;
    session_t *c;
    LIST_FOREACH(c, &ss->all, all)
        if (c->state != SESSION_CLOSING) open++;
    int n = snprintf(line, cap, "OK clients=%zu shown=%zu", open,
                     open < SESSION_CLIENTS_SHOWN ? open : (size_t)SESSION_CLIENTS_SHOWN);
    size_t len = (size_t)n;
    LIST_FOREACH(c, &ss->all, all) {
        if (shown == SESSION_CLIENTS_SHOWN) break;
        if (c->state == SESSION_CLOSING) continue;
        n = snprintf(line + len, cap - len, " %llu:%d:%u:%u:%zu:%zu",
                     (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
                     (unsigned)c->gid, lockmgr_owner_held(c->owner), lockmgr_owner_waiting(c->owner));
        if (n < 0 || (size_t)n >= cap - len - 2) break;
        len += (size_t)n;
        shown++;
    }
    line[len++] = '\n';
    count_reply(s, SESSION_RESULT_OK);
    send_reply(s, to, line, len);
    free(line);
}

/* A lock manager reply to c as one protocol line. */
static void send_lock_reply(session_t *s, call_t *c, const lock_reply_t *r) {
    char line[PROTO_REPLY_LIST_MAX > PROTO_REPLY_MAX ? PROTO_REPLY_LIST_MAX : PROTO_REPLY_MAX];
    int n = reply_format(line, r->type == LOCK_REPLY_LIST ? PROTO_REPLY_LIST_MAX : PROTO_REPLY_MAX,
                         verb_of(s, c->req.cmd)->flags, r);
    /* A client's connect is said at info once it holds a lock: health
     * checks that only PING or INFO never are. */
    if (r->type == LOCK_REPLY_GRANTED && s->grants++ == 0)
        log_info("client %llu (pid %d uid %u) connected %.1f s ago holds its first lock",
                 (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid,
                 (double)(uv_now(s->ss->loop) - s->connected_ms) / 1000.0);
    if (r->type == LOCK_REPLY_TIMEOUT && c->waits) s->timeouts++;
    if (r->type == LOCK_REPLY_ERROR) s->ss->stats.errors++;
    count_reply(s, r->type == LOCK_REPLY_TIMEOUT ? SESSION_RESULT_TIMEOUT
                   : r->type == LOCK_REPLY_ERROR ? SESSION_RESULT_ERR(reply_err(r->err))
                                                 : SESSION_RESULT_OK);
    if (n > 0) send_reply(s, &c->req, line, (size_t)n);
}

static uint64_t now_wall_ms(void) {
    uv_timeval64_t tv;
    if (uv_gettimeofday(&tv) != 0) return 0;
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* LIST: only names the peer may read are listed. */
static int list_keep(void *data, const char *name, size_t len) {
    session_t *s = ((call_t *)data)->s;
    int rule;
    return access_decide(s->ss->conf->access, &s->view, &s->peer, name, len, &rule) >=
           ACCESS_READ;
}

static void call_end(call_t *c);
static void drain_end(session_t *s);

/* LIST's answer: "OK LIST <n> <more>" and n entry lines, or ERR BACKEND;
 * the block is queued whole, its first line tagged. */
static void on_listed(void *data, list_result_t *res) {
    call_t *c = data;
    session_t *s = c->s;
    c->listing = NULL;
    if (s->state == SESSION_CLOSING) return; /* the call goes in on_close */
    s->cmd = c->req.cmd;
    if (res->status != BACKEND_OK) {
        send_error(s, &c->req, PROTO_ERR_BACKEND, res->error[0] ? res->error : NULL);
    } else {
        buf_t b = {0};
        /* The reply fits the connection's output limit, with room. */
        if (listfmt_reply(&b, res->entries, res->n, res->more, s->ss->conf->max_output / 2) !=
            0) {
            send_error(s, &c->req, PROTO_ERR_LIMIT, "out of memory");
        } else {
            count_reply(s, SESSION_RESULT_OK);
            send_reply(s, &c->req, buf_start(&b), b.len);
        }
        buf_free(&b);
    }
    if (s->state != SESSION_CLOSING) call_end(c);
}

const listing_ring_t *sessions_lost(const sessions_t *ss) {
    return &ss->lost;
}

lockmgr_t *sessions_locks(const sessions_t *ss) {
    return ss->locks;
}

/* The lock manager's later answer to one of the session's calls. */
static void on_lock_reply(void *data, void *call, const lock_reply_t *reply) {
    session_t *s = data;
    call_t *c = call;
    if (s->state == SESSION_CLOSING) return; /* the call goes in on_close */
    s->cmd = c->req.cmd;
    send_lock_reply(s, c, reply);
    if (s->state != SESSION_CLOSING) call_end(c);
}

/* A lock manager event: !LOST, !LEADER. */
static void on_lock_event(void *data, const lock_event_t *ev) {
    session_t *s = data;
    char line[PROTO_REPLY_MAX];
    if (s->state == SESSION_CLOSING) return;
    if (ev->type == LOCK_EVENT_LOST) {
        const char *reason = reply_loss_reason(ev->why);
        listing_ring_add(&s->ss->lost, now_wall_ms(), ev->name, ev->len, reason,
                         (long long)s->pid, (long long)s->uid);
        /* Its holder may have gone on as if it still held it: who that is. */
        log_warn("client %llu (pid %d uid %u) lost lock %.*s: %s", (unsigned long long)s->id,
                 (int)s->pid, (unsigned)s->uid, (int)ev->len, ev->name, reason);
    }
    int n = reply_event(line, sizeof(line), ev);
    if (n > 0) send_line(s, line, (size_t)n);
}

/* A denial's log line: one per uid and rule a minute, then how many more. */
static void log_denied(session_t *s, const proto_request_t *req, int rule, const char *why) {
    const access_rules_t *r = s->ss->conf->access;
    int key = rule < 0 ? -1
              : r->rules[rule].from == ACCESS_FROM_FILE ? r->rules[rule].line
                                                        : -2 - (int)r->rules[rule].from;
    uint64_t more;
    if (!access_log_deny(&s->ss->deny_log, s->uid, key, uv_now(s->ss->loop), &more)) return;
    char extra[96] = "";
    if (more > 0)
        snprintf(extra, sizeof(extra), " (and %llu more of uid %u by this rule in the last %d s)",
                 (unsigned long long)more, (unsigned)s->uid, ACCESS_LOG_EVERY_MS / 1000);
    log_warn("client %llu (pid %d uid %u gid %u) denied %s%s%.*s: %s%s",
             (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid, (unsigned)s->gid,
             proto_cmd_name(req->cmd), req->name_len ? " " : "", (int)req->name_len, req->name,
             why, extra);
}

/* 1 if the peer has the right req's verb needs (proto.h's table) on its
 * name, or on some name for a verb without one. Else it is answered
 * ERR DENIED, logged and counted, and nothing else happens. */
static int allowed_name(session_t *s, const proto_request_t *req, const char *name,
                        size_t len) {
    access_right_t need = (access_right_t)proto_cmd_right(req->cmd);
    if (need == ACCESS_NONE) return 1;
    const access_rules_t *r = s->ss->conf->access;
    int rule;
    if (len == 0) name = NULL;
    access_right_t got = name ? access_decide(r, &s->view, &s->peer, name, len, &rule)
                              : access_best(r, &s->view, &s->peer, &rule);
    if (got >= need) return 1;
    char why[PROTO_REPLY_MAX];
    access_explain(r, rule, &s->peer, need, name, len, why, sizeof(why));
    log_denied(s, req, rule, why);
    s->ss->stats.denied++;
    send_error(s, req, PROTO_ERR_DENIED, why);
    return 0;
}

/* ... on each of its names, for a request of many. */
static int allowed(session_t *s, const proto_request_t *req) {
    if (req->nnames == 0) return allowed_name(s, req, req->name, req->name_len);
    for (unsigned i = 0; i < req->nnames; i++) {
        size_t len;
        const char *name = proto_mname(req, i, &len);
        if (!allowed_name(s, req, name, len)) return 0;
    }
    return 1;
}

_Static_assert((int)PROTO_RIGHT_READ == (int)ACCESS_READ &&
                   (int)PROTO_RIGHT_LOCK == (int)ACCESS_LOCK &&
                   (int)PROTO_RIGHT_ADMIN == (int)ACCESS_ADMIN,
               "proto.h's rights are access.h's");

/* ---- calls: requests in progress ----------------------------------------------------- */


/* Leaves c's places in its names' lines. */
static void call_unqueue(call_t *c) {
    hmap_t *lines = &c->s->lines;
    for (unsigned i = 0; i < c->nturns; i++) {
        turn_t *t = &c->turns[i];
        TAILQ_REMOVE(&t->line->turns, t, link);
        if (TAILQ_EMPTY(&t->line->turns)) {
            hmap_del(lines, &t->line->node);
            free(t->line);
        }
    }
    if (c->turns != &c->one) free(c->turns);
    c->turns = NULL;
    c->nturns = 0;
    /* A burst's many buckets go with it; a session keeps the few. */
    if (lines->buckets != NULL && lines->count == 0 && lines->nbuckets > HMAP_MIN_BUCKETS)
        hmap_free(lines);
}

/* c takes a place at the end of the line of each of its names, if its
 * verb takes turns. The calls before it on a name are then those in the
 * line: comparing c's names with those of every earlier call cost up to
 * 64 x 64 comparisons a pair, and one client's max_inflight MLOCKs
 * stalled every client for seconds. -1 on no memory, no place taken. */
static int call_queue(call_t *c) {
    session_t *s = c->s;
    const proto_request_t *r = &c->req;
    verb_order_t order = order_of(verb_of(s, r->cmd));
    unsigned n = r->nnames > 0 ? r->nnames : 1;
    char key[1 + PROTO_NAME_MAX];
    if (order == ORDER_NONE) return 0;
    if (s->lines.buckets == NULL && hmap_init(&s->lines) != 0) return -1;
    c->turns = n == 1 ? &c->one : calloc(n, sizeof(*c->turns));
    if (c->turns == NULL) return -1;
    for (unsigned i = 0; i < n; i++) {
        size_t len = r->name_len;
        const char *name = r->nnames > 0 ? proto_mname(r, i, &len) : r->name;
        if (len > PROTO_NAME_MAX) len = PROTO_NAME_MAX; /* the parser's bound */
        key[0] = (char)order;
        memcpy(key + 1, name, len);
        hmap_node_t *node = hmap_get(&s->lines, key, 1 + len);
        name_line_t *line = node ? container_of(node, name_line_t, node) : NULL;
        if (line == NULL) {
            line = malloc(sizeof(*line) + 1 + len);
            if (line == NULL) {
                call_unqueue(c);
                return -1;
            }
            memcpy(line->key, key, 1 + len);
            line->node.key = line->key;
            line->node.len = 1 + len;
            TAILQ_INIT(&line->turns);
            hmap_put(&s->lines, &line->node);
        } else if (TAILQ_LAST(&line->turns, turns_s)->c == c) {
            continue; /* a name twice (the parser refuses it): one place */
        }
        turn_t *t = &c->turns[c->nturns++];
        t->c = c;
        t->line = line;
        TAILQ_INSERT_TAIL(&line->turns, t, link);
    }
    return 0;
}

/* 1 if the connection holds each of r's names now. */
static int holds_all(const session_t *s, const proto_request_t *r) {
    if (r->nnames == 0) return lockmgr_owner_holds(s->owner, r->name, r->name_len);
    for (unsigned i = 0; i < r->nnames; i++) {
        size_t l;
        const char *n = proto_mname(r, i, &l);
        if (!lockmgr_owner_holds(s->owner, n, l)) return 0;
    }
    return 1;
}

/* 1 if a call before c takes turns with it on one of its names: c waits
 * for it. A release of what the connection holds now does not wait for a
 * request of it that is waiting for a holder (a semaphore's ACQUIRE of
 * more permits, which may wait for the very permits the release gives
 * back: two tasks of one client would wait for each other for ever). */
static int waits_behind(const call_t *c) {
    int release = -1; /* not asked yet */
    for (unsigned i = 0; i < c->nturns; i++) {
        const turn_t *t = &c->turns[i];
        for (const turn_t *e = TAILQ_FIRST(&t->line->turns); e != t; e = TAILQ_NEXT(e, link)) {
            if (e->c->started && e->c->waits &&
                (verb_of(c->s, c->req.cmd)->flags & LOCK_WORD_RELEASES)) {
                if (release < 0) release = holds_all(c->s, &c->req);
                if (release) continue;
            }
            return 1;
        }
    }
    return 0;
}

static call_t *call_by_tag(const session_t *s, const char *tag, size_t len) {
    hmap_node_t *n = s->tags.buckets != NULL ? hmap_get(&s->tags, tag, len) : NULL;
    return n ? container_of(n, call_t, by_tag) : NULL;
}

static void call_free(call_t *c);

/* A call for req, which it takes over (its names), at the end of the
 * session's calls; NULL on no memory (answered). */
static call_t *call_new(session_t *s, proto_request_t *req) {
    call_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        send_error(s, req, PROTO_ERR_LIMIT, "out of memory");
        return NULL;
    }
    c->s = s;
    c->req = *req;
    req->mnames = NULL; /* the call's now */
    if (call_queue(c) != 0 ||
        (c->req.tag_len > 0 && s->tags.buckets == NULL && hmap_init(&s->tags) != 0)) {
        send_error(s, &c->req, PROTO_ERR_LIMIT, "out of memory");
        call_free(c);
        return NULL;
    }
    TAILQ_INSERT_TAIL(&s->calls, c, link);
    s->nparked++;
    if (c->req.tag_len > 0) {
        s->ntagged++;
        c->by_tag.key = c->req.tag;
        c->by_tag.len = c->req.tag_len;
        hmap_put(&s->tags, &c->by_tag);
    } else {
        s->untagged = c;
        s->state = SESSION_WAITING;
        s->cancel_checked = 0;
    }
    return c;
}

static void call_free(call_t *c) {
    call_unqueue(c);
    proto_request_free(&c->req);
    free(c);
}

/* c is answered: it goes, and calls behind it on its names may start
 * (from the flusher, never from inside the lock manager). */
static void call_end(call_t *c) {
    session_t *s = c->s;
    TAILQ_REMOVE(&s->calls, c, link);
    if (!c->started) s->nparked--;
    if (c->req.tag_len > 0) {
        s->ntagged--;
        hmap_del(&s->tags, &c->by_tag);
    } else {
        s->untagged = NULL;
        if (s->state == SESSION_WAITING) {
            s->state = SESSION_READY; /* drive() goes on with kept input */
        }
    }
    if (order_of(verb_of(s, c->req.cmd)) != ORDER_NONE) s->unpark = 1;
    call_free(c);
    mark_dirty(s);
    drain_end(s);
}

static void call_start(call_t *c);

/* Starts the calls whose turn has come, oldest first. A start may answer
 * any call (one's own at once, another through the lock manager's
 * callback), so the search begins anew after each. */
static void start_parked(session_t *s) {
    s->unpark = 0;
    if (s->nparked == 0) return;
    for (;;) {
        call_t *c;
        TAILQ_FOREACH(c, &s->calls, link)
            if (!c->started && !waits_behind(c)) break;
        if (c == NULL || s->state == SESSION_CLOSING) return;
        call_start(c);
    }
}

/* Withdraws c: a call waiting for its turn goes at once, one in the lock
 * manager is cancelled there if it waits. 1 if it was withdrawn (and
 * answered ERR CANCELLED). */
static int call_cancel(call_t *c) {
    session_t *s = c->s;
    if (!c->started) {
        s->cmd = c->req.cmd;
        send_error(s, &c->req, PROTO_ERR_CANCELLED, NULL);
        if (s->state != SESSION_CLOSING) call_end(c);
        return 1;
    }
    if (c->listing != NULL) return 0; /* LIST's answer comes */
    return lockmgr_cancel(s->ss->locks, s->owner, c);
}

/* The protocol's lock commands as lock manager requests: answered now, or
 * later through on_lock_reply. */
static void start_lock_request(call_t *c) {
    session_t *s = c->s;
    const proto_request_t *req = &c->req;
    const verb_t *v = verb_of(s, req->cmd);
    lock_name_t names[PROTO_MNAMES_MAX];
    for (unsigned i = 0; i < req->nnames; i++)
        names[i].name = proto_mname(req, i, &names[i].len);
    lock_request_t lr = {
        .verb = v->verb,
        .mode = v->mode,
        .op = v->op,
        .name = req->name,
        .len = req->name_len,
        .wait_ms = req->wait_ms,
        .lease_ms = req->lease_ms,
        .count = req->count,
        .value = req->value,
        .value_len = req->value_len,
        .names = names,
        .nnames = req->nnames,
    };
    lock_reply_t now;
    if (req->nnames > 0) { /* the request is about its names only */
        lr.name = NULL;
        lr.len = 0;
    }
    c->waits = (v->flags & LOCK_WORD_WAITS) && (!(v->flags & LOCK_WORD_TRY) || lr.wait_ms > 0);
    if (lockmgr_request(s->ss->locks, s->owner, &lr, c, &now)) {
        s->cmd = req->cmd;
        send_lock_reply(s, c, &now);
        if (s->state != SESSION_CLOSING) call_end(c);
        return;
    }
    deaf_add(s);
}

/* LIST: a read of Redis, answered through on_listed. */
static void start_list(call_t *c) {
    session_t *s = c->s;
    const proto_request_t *req = &c->req;
    c->listing = listing_start(s->ss->locks, req->value, req->value_len, req->limit, list_keep,
                               on_listed, c);
    if (c->listing == NULL) {
        s->cmd = req->cmd;
        send_error(s, req, PROTO_ERR_LIMIT, "out of memory");
        if (s->state != SESSION_CLOSING) call_end(c);
        return;
    }
    deaf_add(s);
}

static void call_start(call_t *c) {
    c->start_seq = ++c->s->ss->start_seq;
    c->started_ms = uv_now(c->s->ss->loop);
    c->started = 1;
    c->s->nparked--;
    verb_of(c->s, c->req.cmd)->start(c);
}

/* ---- requests ------------------------------------------------------------------------- */

/* The connection reads no more and closes once what it has in progress
 * is over (QUIT, TOOLONG): every wait is withdrawn, ERR CANCELLED (a
 * client gone quiet cannot leave it waiting for ever), the other calls
 * (LIST, a release in flight) are answered, then QUIT's BYE, then the
 * replies are flushed and it closes. */
static void drain_end(session_t *s) {
    char line[PROTO_REPLY_MAX];
    if (s->state != SESSION_DRAINING || !TAILQ_EMPTY(&s->calls)) return;
    if (s->quitting) {
        s->quitting = 0;
        int n = proto_reply_ok(line, sizeof(line), "BYE");
        send_tagged(s, s->quit_tag, s->quit_tag_len, line, (size_t)n);
    }
    mark_dirty(s); /* flush closes it */
}

static void drain(session_t *s) {
    if (s->state == SESSION_CLOSING) return;
    s->state = SESSION_DRAINING;
    uv_read_stop((uv_stream_t *)s->pipe);
    /* A withdrawal answers at once, and may end other calls through the
     * lock manager's callback: look again from the start after each. */
    for (;;) {
        call_t *c;
        TAILQ_FOREACH(c, &s->calls, link)
            if (!c->withdrawn) break;
        if (c == NULL) break;
        c->withdrawn = 1;
        call_cancel(c);
        if (s->state == SESSION_CLOSING) return;
    }
    drain_end(s);
}

static void do_ping(session_t *s, const proto_request_t *req) {
    char line[PROTO_REPLY_MAX];
    count_reply(s, SESSION_RESULT_OK);
    int n = proto_reply_ok(line, sizeof(line), "PONG");
    send_reply(s, req, line, (size_t)n);
}

/* QUIT: its BYE comes once every call in progress is answered (drain). */
static void do_quit(session_t *s, const proto_request_t *req) {
    count_reply(s, SESSION_RESULT_OK);
    s->quitting = 1;
    memcpy(s->quit_tag, req->tag, req->tag_len);
    s->quit_tag_len = req->tag_len;
    drain(s);
}

/* CANCEL: bare, it says whether it withdrew the untagged wait right before
 * it (check_cancel); CANCEL #tag withdraws that tagged call. */
static void do_cancel(session_t *s, const proto_request_t *req) {
    char line[PROTO_REPLY_MAX];
    int done;
    if (req->value_len == 0) {
        done = s->cancelled;
        s->cancelled = 0;
    } else {
        call_t *c = call_by_tag(s, req->value, req->value_len);
        done = c != NULL && call_cancel(c);
        if (s->state == SESSION_CLOSING) return;
    }
    s->cmd = req->cmd;
    count_reply(s, SESSION_RESULT_OK);
    int n = proto_reply_ok_num(line, sizeof(line), done);
    send_reply(s, req, line, (size_t)n);
}

/* A request about a name of any kind, with LOCK_WORD_* flags f. */
#define NAME_VERB(k, f) \
    {.start = start_lock_request, .verb = LOCK_VERB_##k, .mode = LOCK_MODE_ANY, .flags = (f)}

/* The session's own commands, and those of every kind's names; the
 * kinds' own come from their tables (verbs_build). */
static const verb_t own_verbs[PROTO_CMD_COUNT] = {
    [PROTO_CMD_PING] = {.now = do_ping},
    [PROTO_CMD_QUIT] = {.now = do_quit},
    [PROTO_CMD_INFO] = {.now = send_info},
    [PROTO_CMD_CANCEL] = {.now = do_cancel},
    [PROTO_CMD_CLIENTS] = {.now = send_clients},
    [PROTO_CMD_LIST] = {.start = start_list},
    /* a plain, a fair or a multi-name lock's hold */
    [PROTO_CMD_UNLOCK] = NAME_VERB(UNLOCK, LOCK_WORD_AS_UNLOCK),
    [PROTO_CMD_RENEW] = NAME_VERB(RENEW, LOCK_WORD_TURNS),
    [PROTO_CMD_FORCEUNLOCK] = NAME_VERB(FORCE, LOCK_WORD_TURNS),
    [PROTO_CMD_STATUS] = NAME_VERB(STATUS, 0),
    [PROTO_CMD_WHO] = NAME_VERB(WHO, 0),
};

/* Every command's verb: own_verbs, then each kind's words (lockmgr_word)
 * by the command of that word. -1, said, when a kind's word is no
 * command or one served already, or a command is left without a verb: a
 * build whose kinds and protocol disagree. */
static int verbs_build(verb_t *verbs) {
    const lock_word_t *w;
    memcpy(verbs, own_verbs, sizeof(own_verbs));
    for (size_t i = 0; (w = lockmgr_word(i)) != NULL; i++) {
        proto_cmd_t cmd = proto_cmd_of(w->word, strlen(w->word));
        if (cmd == PROTO_CMD_NONE || verbs[cmd].now != NULL || verbs[cmd].start != NULL) {
            log_error("a lock kind's word %s is %s", w->word,
                      cmd == PROTO_CMD_NONE ? "no command" : "served already");
            return -1;
        }
        verbs[cmd] = (verb_t){.start = start_lock_request, .verb = w->verb, .mode = w->mode,
                              .op = w->op, .flags = w->flags};
    }
    for (int c = PROTO_CMD_NONE + 1; c < PROTO_CMD_COUNT; c++) {
        if (verbs[c].now == NULL && verbs[c].start == NULL) {
            log_error("the command %s has no verb", proto_cmd_name((proto_cmd_t)c));
            return -1;
        }
    }
    return 0;
}

static void dispatch(session_t *s, proto_request_t *req) {
    const verb_t *v = verb_of(s, req->cmd);
    s->ss->stats.requests++;
    s->cmd = req->cmd;
    if (req->tag_len > 0 && call_by_tag(s, req->tag, req->tag_len) != NULL) {
        send_error(s, req, PROTO_ERR_ARGS, "tag in use");
        return;
    }
    if (!allowed(s, req)) return;
    if (v->now != NULL) {
        v->now(s, req);
        return;
    }
    if (v->start == NULL) { /* the parser knows every verb the table has */
        send_error(s, req, PROTO_ERR_UNKNOWN, NULL);
        return;
    }
    if (req->tag_len > 0 && s->ntagged >= s->ss->conf->max_inflight) {
        send_error(s, req, PROTO_ERR_LIMIT, "max_inflight reached");
        return;
    }
    call_t *c = call_new(s, req);
    if (c == NULL || waits_behind(c)) return; /* it starts when its turn comes */
    call_start(c);
}

/* Handles requests from data until it runs out or an untagged request is
 * in progress. Returns the bytes consumed. */
static size_t handle_input(session_t *s, const char *data, size_t len) {
    size_t off = 0;

    while (off < len && s->state == SESSION_READY) {
        proto_request_t req;
        size_t used;
        proto_status_t st = proto_feed(&s->parser, data + off, len - off, &used, &req);
        off += used;
        if (st == PROTO_REQUEST) {
            dispatch(s, &req);
            proto_request_free(&req);
        } else if (st == PROTO_ERROR) {
            s->ss->stats.requests++;
            s->cmd = req.cmd;
            /* A bad request's error under a tag in progress would pass
             * for that request's answer (TOOLONG closes: said as ever). */
            if (req.tag_len > 0 && req.err != PROTO_ERR_TOOLONG &&
                call_by_tag(s, req.tag, req.tag_len) != NULL)
                send_error(s, &req, PROTO_ERR_ARGS, "tag in use");
            else
                send_error(s, &req, req.err, req.detail);
            if (req.err == PROTO_ERR_TOOLONG && s->state != SESSION_CLOSING) {
                /* The stream cannot be resynchronised: answer, then close. */
                drain(s);
                return len;
            }
        }
    }
    return off;
}

/* While an untagged request is in progress, the line right after it may be
 * a bare CANCEL: then it is withdrawn now, and the CANCEL, read in its
 * turn, says so. */
static void check_cancel(session_t *s) {
    if (s->state != SESSION_WAITING || s->cancel_checked || s->untagged == NULL) return;
    int next = proto_next_is(buf_start(&s->in), s->in.len, PROTO_CMD_CANCEL);
    if (next < 0) return; /* no whole line yet */
    s->cancel_checked = 1;
    if (next == 1) s->cancelled = call_cancel(s->untagged);
}

/* Keeps input that arrived while a request is in flight. */
static void keep_input(session_t *s, const char *data, size_t len) {
    if (buf_append(&s->in, data, len) != 0) {
        log_error("client %llu: out of memory, closing", (unsigned long long)s->id);
        session_close(s);
        return;
    }
    check_cancel(s);
    if (s->in.len >= SESSION_INBUF_MAX && !s->paused) {
        s->paused = 1;
        uv_read_stop((uv_stream_t *)s->pipe);
        deaf_add(s);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);

/* 1 if the peer closed both directions (it is gone), 0 if it only shut
 * its writing side, as `socat` does at the end of its input. */
static int peer_gone(session_t *s) {
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)s->pipe, &fd) != 0) return 1;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, 0) < 0) return 1;
    return (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)handle;
    (void)suggested;
    buf->base = read_chunk;
    buf->len = sizeof(read_chunk);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    session_t *s = stream->data;

    if (nread < 0) {
        if (nread != UV_EOF || peer_gone(s)) {
            /* Gone: its locks go and its wait ends, at once. */
            if (nread != UV_EOF)
                log_debug("client %llu: read: %s", (unsigned long long)s->id,
                          uv_strerror((int)nread));
            session_close(s);
            return;
        }
        /* Half-closed: answer what it sent, then close (drive). */
        s->eof = 1;
        uv_read_stop(stream);
        deaf_add(s);
        mark_dirty(s);
        return;
    }
    if (nread == 0 || s->state == SESSION_DRAINING || s->state == SESSION_CLOSING)
        return;
    if (s->in.len > 0 || s->state == SESSION_WAITING) {
        keep_input(s, buf->base, (size_t)nread);
        return;
    }
    size_t used = handle_input(s, buf->base, (size_t)nread);
    if (used < (size_t)nread && s->state != SESSION_CLOSING)
        keep_input(s, buf->base + used, (size_t)nread - used);
}

static void on_close(uv_handle_t *handle) {
    session_t *s = handle->data;
    sessions_t *ss = s->ss;

    /* The owner goes here, never in session_close: a reply or an event
     * that overflows the output closes the session from inside the lock
     * manager's callback, and what called it still uses the owner's
     * observations, holds and wait (issue 36). */
    if (s->owner != NULL) lockmgr_owner_drop(ss->locks, s->owner);
    s->owner = NULL;
    call_t *c;
    while ((c = TAILQ_FIRST(&s->calls)) != NULL) {
        TAILQ_REMOVE(&s->calls, c, link);
        call_free(c);
    }
    if (s->lines.buckets != NULL) hmap_free(&s->lines);
    if (s->tags.buckets != NULL) hmap_free(&s->tags);
    LIST_REMOVE(s, all);
    if (s->leave != NULL) s->leave(s->leave_data, s->uid);
    access_view_free(&s->view);
    proto_parser_free(&s->parser);
    buf_free(&s->in);
    buf_free(&s->out);
    buf_free(&s->wbuf);
    free(s->pipe);
    free(s);
    ss->stats.connections--;
    if (ss->closed_cb != NULL && LIST_EMPTY(&ss->all)) {
        void (*cb)(void *) = ss->closed_cb;
        ss->closed_cb = NULL;
        cb(ss->closed_data);
    }
}

/* A session that no longer reads (after a half-close, or paused with a
 * full input buffer) while a request waits would not see its peer go
 * away: such sessions are checked every SESSION_HANGUP_CHECK_MS. */
static void on_hangups(uv_timer_t *t);

static void deaf_remove(session_t *s) {
    sessions_t *ss = s->ss;
    if (!s->deaf) return;
    LIST_REMOVE(s, deaf_link);
    s->deaf = 0;
    if (LIST_EMPTY(&ss->deaf)) uv_timer_stop(&ss->hangups);
}

/* 1 while s has requests in progress but reads nothing. */
static int deaf(const session_t *s) {
    return (s->eof || s->paused) && !TAILQ_EMPTY(&s->calls) && s->state != SESSION_CLOSING;
}

static void deaf_add(session_t *s) {
    sessions_t *ss = s->ss;
    if (s->deaf || !deaf(s)) return;
    if (LIST_EMPTY(&ss->deaf))
        uv_timer_start(&ss->hangups, on_hangups, SESSION_HANGUP_CHECK_MS,
                       SESSION_HANGUP_CHECK_MS);
    s->deaf = 1;
    LIST_INSERT_HEAD(&ss->deaf, s, deaf_link);
}

static void on_hangups(uv_timer_t *t) {
    sessions_t *ss = t->data;
    session_t *s = LIST_FIRST(&ss->deaf);
    while (s != NULL) {
        session_t *next = LIST_NEXT(s, deaf_link);
        if (!deaf(s)) deaf_remove(s);
        else if (peer_gone(s)) session_close(s);
        s = next;
    }
}

/* A client that held or waited for locks says at info level that it is
 * gone, with what it held: its locks go with it. The others (PING, INFO,
 * STATUS: health checks) and every client at shutdown, at debug level. */
static void log_closed(const session_t *s) {
    sessions_t *ss = s->ss;
    size_t held = s->owner ? lockmgr_owner_held(s->owner) : 0;
    size_t waiting = s->owner ? lockmgr_owner_waiting(s->owner) : 0;
    int locker = held > 0 || waiting || s->grants > 0 || s->timeouts > 0;
    conf_log_level_t level = locker && ss->closed_cb == NULL ? CONF_LOG_INFO : CONF_LOG_DEBUG;
    if (!log_enabled(level)) return;
    uint64_t ms = uv_now(ss->loop) - s->connected_ms;
    log_msg(level,
            "client %llu (pid %d uid %u) disconnected holding %zu lock%s%s; %llu grant%s, "
            "%llu timeout%s in %llu.%llu s",
            (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid, held, held == 1 ? "" : "s",
            waiting ? " and waiting for one" : "", (unsigned long long)s->grants,
            s->grants == 1 ? "" : "s", (unsigned long long)s->timeouts,
            s->timeouts == 1 ? "" : "s", (unsigned long long)(ms / 1000),
            (unsigned long long)(ms % 1000 / 100));
}

/* Closes the connection: nothing more is read, answered or told. It may
 * be called from anywhere, a lock manager callback too: its lock state
 * goes in on_close, once the loop is out of every callback. */
static void session_close(session_t *s) {
    if (s->state == SESSION_CLOSING) return;
    s->state = SESSION_CLOSING;
    unmark_dirty(s);
    deaf_remove(s);
    log_closed(s);
    call_t *c;
    TAILQ_FOREACH(c, &s->calls, link) {
        if (c->listing != NULL) listing_cancel(c->listing);
        c->listing = NULL;
    }
    uv_close((uv_handle_t *)s->pipe, on_close);
}

static void flush(session_t *s);

static void on_write(uv_write_t *req, int status) {
    session_t *s = req->data;
    s->writing = 0;
    buf_clear(&s->wbuf);
    if (s->state == SESSION_CLOSING) return;
    if (status < 0) {
        log_debug("client %llu: write: %s", (unsigned long long)s->id,
                  uv_strerror(status));
        session_close(s);
        return;
    }
    buf_shrink(&s->wbuf);
    flush(s);
}

/* Hands queued replies to the socket, one write at a time. */
static void flush(session_t *s) {
    if (s->writing || s->state == SESSION_CLOSING) return;
    if (s->out.len == 0) {
        if (s->state == SESSION_DRAINING && TAILQ_EMPTY(&s->calls)) session_close(s);
        return;
    }
    /* Try a plain write first: most replies go out whole, and a uv_write
     * would cost an epoll_ctl when its queue drains. */
    uv_buf_t b = uv_buf_init(buf_start(&s->out), (unsigned)s->out.len);
    int n = uv_try_write((uv_stream_t *)s->pipe, &b, 1);
    if (n == (int)s->out.len) {
        buf_clear(&s->out);
        buf_shrink(&s->out);
        if (s->state == SESSION_DRAINING && TAILQ_EMPTY(&s->calls)) session_close(s);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        log_debug("client %llu: write: %s", (unsigned long long)s->id, uv_strerror(n));
        session_close(s);
        return;
    }
    if (n > 0) buf_consume(&s->out, (size_t)n);
    /* The rest waits for the socket to drain. */
    buf_t t = s->wbuf;
    s->wbuf = s->out;
    s->out = t;
    b = uv_buf_init(buf_start(&s->wbuf), (unsigned)s->wbuf.len);
    s->wreq.data = s;
    int rc = uv_write(&s->wreq, (uv_stream_t *)s->pipe, &b, 1, on_write);
    if (rc < 0) {
        log_debug("client %llu: write: %s", (unsigned long long)s->id, uv_strerror(rc));
        session_close(s);
        return;
    }
    s->writing = 1;
}

/* The connection's state machine. It runs from the loop's check phase
 * (on_check), never from inside a lock manager callback, whenever
 * something happened to s (mark_dirty): a call ended, the peer shut its
 * side, output was queued.
 *
 *   READY     reading: each whole line is dispatched as it comes (on_read).
 *             An untagged call makes it WAITING; EOF with nothing left in
 *             progress, QUIT or a line too long, DRAINING.
 *   WAITING   an untagged call is in progress: input is kept in s->in
 *             (reading pauses at SESSION_INBUF_MAX) and only looked at for
 *             a bare CANCEL right behind the call; READY again when it is
 *             answered, going on with what was kept.
 *   DRAINING  reading no more: waits are withdrawn, the other calls
 *             answered, QUIT's BYE queued (drain); it closes once every
 *             reply is written (flush).
 *   CLOSING   uv_close() was called: its owner and calls go in on_close.
 *
 * Tagged calls live in READY, WAITING and DRAINING alike: each starts when
 * its turn on its names comes (start_parked), ends when answered. */
static void drive(session_t *s) {
    if (s->ss->frozen) { /* a hand-over: only what is answered goes out */
        if (s->state != SESSION_CLOSING) flush(s);
        return;
    }
    if (s->unpark) start_parked(s);
    switch (s->state) {
    case SESSION_READY:
        if (s->in.len > 0) { /* kept while an untagged call was in progress */
            size_t used = handle_input(s, buf_start(&s->in), s->in.len);
            if (s->state == SESSION_CLOSING) return;
            buf_consume(&s->in, used);
            buf_shrink(&s->in);
            if (s->state == SESSION_WAITING) check_cancel(s);
        }
        if (s->state != SESSION_READY) break;
        if (s->paused && s->in.len < SESSION_INBUF_MAX && !s->eof) {
            s->paused = 0;
            uv_read_start((uv_stream_t *)s->pipe, on_alloc, on_read);
        }
        if (s->eof && s->in.len == 0 && TAILQ_EMPTY(&s->calls))
            s->state = SESSION_DRAINING; /* everything it sent is answered */
        break;
    case SESSION_WAITING:
        check_cancel(s);
        break;
    case SESSION_DRAINING:
    case SESSION_CLOSING:
        break;
    }
    if (s->state != SESSION_CLOSING && !s->dirty) flush(s); /* re-marked: next round */
}

/* After each poll: drive the sessions something happened to. */
static void on_check(uv_check_t *handle) {
    sessions_t *ss = handle->data;
    uint64_t round = ss->round++;
    session_t *s;

    /* Sessions marked during this round wait for the next one. */
    while ((s = TAILQ_FIRST(&ss->dirty)) != NULL && s->dirty_round <= round) {
        unmark_dirty(s);
        drive(s);
    }
    if (TAILQ_EMPTY(&ss->dirty)) uv_idle_stop(&ss->keepalive);
}

static void on_idle(uv_idle_t *handle) {
    (void)handle; /* only keeps the loop from blocking while output waits */
}

sessions_t *sessions_new(uv_loop_t *loop, const conf_t *conf, lockmgr_t *locks) {
    sessions_t *ss = calloc(1, sizeof(*ss));
    if (ss == NULL) return NULL;
    if (verbs_build(ss->verbs) != 0) {
        free(ss);
        return NULL;
    }
    ss->loop = loop;
    ss->conf = conf;
    ss->locks = locks;
    ss->started_ms = uv_now(loop);
    LIST_INIT(&ss->all);
    LIST_INIT(&ss->deaf);
    TAILQ_INIT(&ss->dirty);
    uv_check_init(loop, &ss->flusher);
    ss->flusher.data = ss;
    uv_check_start(&ss->flusher, on_check);
    uv_unref((uv_handle_t *)&ss->flusher);
    uv_idle_init(loop, &ss->keepalive);
    ss->keepalive.data = ss;
    uv_timer_init(loop, &ss->hangups);
    ss->hangups.data = ss;
    if (access_log_init(&ss->deny_log) != 0) {
        log_error("out of memory");
        abort(); /* at start only: main has nothing to unwind yet */
    }
    return ss;
}

static void session_free_pipe(uv_handle_t *handle) {
    free(handle);
}

int sessions_full(const sessions_t *ss) {
    return ss->stats.connections >= ss->conf->max_clients || ss->closed_cb != NULL;
}

void sessions_count_refused(sessions_t *ss, int per_uid) {
    ss->stats.rejected++;
    if (per_uid) ss->stats.rejected_per_uid++;
}

/* A session for pipe, of peer, with id: listed, counted open, with its
 * owner (NULL on no memory: the caller closes it). NULL on no memory. */
static session_t *session_new(sessions_t *ss, uv_pipe_t *pipe, const session_peer_t *peer,
                              uint64_t id) {
    session_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    s->ss = ss;
    TAILQ_INIT(&s->calls);
    s->pipe = pipe;
    pipe->data = s;
    s->pid = peer->pid;
    s->uid = peer->uid;
    s->gid = peer->gid;
    s->peer = peer->access;
    s->leave = peer->leave;
    s->leave_data = peer->leave_data;
    proto_parser_init(&s->parser, ss->conf->max_line);
    s->id = id;
    LIST_INSERT_HEAD(&ss->all, s, all);
    ss->stats.connections++;
    s->owner = lockmgr_owner_new(ss->locks, s->id, s->uid, on_lock_reply, on_lock_event, s);
    if (s->owner != NULL) lockmgr_owner_set_pid(s->owner, s->pid);
    return s;
}

void sessions_adopt(sessions_t *ss, uv_pipe_t *pipe, const session_peer_t *peer) {
    session_t *s = session_new(ss, pipe, peer, ss->next_id + 1);
    if (s == NULL) {
        log_error("out of memory: a connection of uid %u closed", (unsigned)peer->uid);
        if (peer->leave != NULL) peer->leave(peer->leave_data, peer->uid);
        uv_close((uv_handle_t *)pipe, session_free_pipe);
        return;
    }
    ss->next_id++;
    if (s->owner == NULL) {
        log_error("client %llu: out of memory, closing", (unsigned long long)s->id);
        s->state = SESSION_CLOSING;
        uv_close((uv_handle_t *)s->pipe, on_close);
        return;
    }
    ss->stats.connections_total++;
    s->connected_ms = uv_now(ss->loop);
    log_debug("client %llu connected (pid %d uid %u gid %u)",
              (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid,
              (unsigned)s->gid);
    if (!ss->frozen) uv_read_start((uv_stream_t *)s->pipe, on_alloc, on_read);
}

void sessions_close_all(sessions_t *ss, void (*done)(void *data), void *data) {
    ss->closed_cb = done;
    ss->closed_data = data;
    session_t *s;
    LIST_FOREACH(s, &ss->all, all) session_close(s);
    if (LIST_EMPTY(&ss->all)) {
        ss->closed_cb = NULL;
        done(data);
    }
}

static void on_sessions_handle_close(uv_handle_t *handle) {
    sessions_t *ss = handle->data;
    if (--ss->closing_handles != 0) return;
    access_log_free(&ss->deny_log);
    free(ss);
}

/* Frees ss once its own handles are closed; the loop must run on. */
void sessions_free(sessions_t *ss) {
    ss->closing_handles = 3;
    uv_close((uv_handle_t *)&ss->flusher, on_sessions_handle_close);
    uv_close((uv_handle_t *)&ss->keepalive, on_sessions_handle_close);
    uv_close((uv_handle_t *)&ss->hangups, on_sessions_handle_close);
}

void sessions_stats(const sessions_t *ss, sessions_stats_t *out) {
    *out = ss->stats;
    out->uptime_s = (uv_now(ss->loop) - ss->started_ms) / 1000;
}

/* ---- live restore (daemon/handover.c) ---------------------------------------------- */

size_t sessions_count(const sessions_t *ss) {
    size_t n = 0;
    const session_t *s;
    LIST_FOREACH(s, &ss->all, all) n++;
    return n;
}

void sessions_count_upgrade(sessions_t *ss, int ok, uint64_t ms, uint64_t bytes) {
    if (!ok) {
        ss->stats.upgrade_failures++;
        return;
    }
    ss->stats.upgrades++;
    ss->stats.upgrade_ms = ms;
    ss->stats.upgrade_state_bytes = bytes;
}

/* Reading, for a session that reads (not paused, not half-closed). */
static int reads(const session_t *s) {
    return (s->state == SESSION_READY || s->state == SESSION_WAITING) && !s->paused && !s->eof;
}

void sessions_freeze(sessions_t *ss, int frozen) {
    session_t *s;
    ss->frozen = frozen;
    LIST_FOREACH(s, &ss->all, all) {
        if (s->state == SESSION_CLOSING) continue;
        if (frozen) {
            if (reads(s)) uv_read_stop((uv_stream_t *)s->pipe);
            continue;
        }
        if (reads(s)) uv_read_start((uv_stream_t *)s->pipe, on_alloc, on_read);
        s->unpark = 1; /* calls whose turn came meanwhile */
        mark_dirty(s); /* and input kept meanwhile */
    }
}

const char *sessions_busy(const sessions_t *ss) {
    const session_t *s;
    const call_t *c;
    LIST_FOREACH(s, &ss->all, all) {
        if (s->state == SESSION_CLOSING) return "a connection is closing";
        /* once per connection, not per call: a thousand tagged waits each
         * looked up among the others cost a million steps a turn */
        if (!lockmgr_owner_waits_only(s->owner)) return "a request is in progress";
        TAILQ_FOREACH(c, &s->calls, link) {
            if (!c->started) continue;
            if (c->listing != NULL) return "a LIST is in progress";
            if (c->withdrawn) return "a request is in progress";
        }
    }
    return NULL;
}

/* The bytes not yet written: the end of the write in flight, then out. */
static void save_output(const session_t *s, statew_t *w, buf_t *tmp) {
    buf_clear(tmp);
    if (s->writing) {
        size_t left = uv_stream_get_write_queue_size((const uv_stream_t *)s->pipe);
        if (left > s->wbuf.len) left = s->wbuf.len;
        if (left > 0 && buf_append(tmp, buf_start(&s->wbuf) + s->wbuf.len - left, left) != 0)
            w->failed = 1;
    }
    if (s->out.len > 0 && buf_append(tmp, buf_start(&s->out), s->out.len) != 0) w->failed = 1;
    statew_bytes(w, buf_start(tmp), tmp->len);
}

static void save_call(const session_t *s, const call_t *c, statew_t *w) {
    const proto_request_t *r = &c->req;
    statew_rec(w, "call");
    statew_u64(w, (uint64_t)c->started);
    statew_u64(w, c->start_seq);
    statew_u64(w, c->started_ms);
    statew_str(w, proto_cmd_name(r->cmd));
    statew_bytes(w, r->tag, r->tag_len);
    statew_bytes(w, r->name, r->name_len);
    statew_u64(w, r->wait_ms);
    statew_u64(w, r->lease_ms);
    statew_u64(w, r->count);
    statew_bytes(w, r->value, r->value_len);
    statew_u64(w, r->limit);
    statew_u64(w, r->nnames);
    for (unsigned i = 0; i < r->nnames; i++) {
        size_t len;
        const char *n = proto_mname(r, i, &len);
        statew_bytes(w, n, len);
    }
    (void)s;
}

void sessions_save(const sessions_t *ss, statew_t *w, void (*each)(void *data, int fd),
                   void *data) {
    const session_t *s;
    const call_t *c;
    buf_t tmp = {0};
    statew_rec(w, "sessions");
    statew_u64(w, ss->next_id);
    statew_u64(w, ss->start_seq);
    statew_u64(w, ss->started_ms);
#define XX(f)                        \
    statew_rec(w, "scounter");       \
    statew_word(w, #f);              \
    statew_u64(w, ss->stats.f);
    XX(connections_total) XX(rejected) XX(rejected_per_uid) XX(denied) XX(requests)
    XX(errors) XX(output_overflows) XX(upgrades) XX(upgrade_failures) XX(upgrade_ms)
    XX(upgrade_state_bytes)
#undef XX
    for (int cmd = 0; cmd < PROTO_CMD_COUNT; cmd++) {
        statew_rec(w, "replies");
        statew_str(w, cmd == PROTO_CMD_NONE ? "" : proto_cmd_name((proto_cmd_t)cmd));
        for (int i = 0; i < SESSION_RESULTS; i++) statew_u64(w, ss->stats.replies[cmd][i]);
    }
    LIST_FOREACH(s, &ss->all, all) {
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)s->pipe, &fd) != 0) {
            w->failed = 1;
            continue;
        }
        statew_rec(w, "conn");
        statew_u64(w, (uint64_t)fd);
        /* the peer as admitted: the groups judged are those of the connect */
        statew_i64(w, (int64_t)s->pid);
        statew_u64(w, (uint64_t)s->uid);
        statew_u64(w, (uint64_t)s->gid);
        statew_u64(w, s->peer.ngids);
        for (size_t g = 0; g < s->peer.ngids; g++) statew_u64(w, (uint64_t)s->peer.gids[g]);
        statew_u64(w, s->id);
        statew_u64(w, s->connected_ms);
        statew_u64(w, s->grants);
        statew_u64(w, s->timeouts);
        statew_u64(w, s->state == SESSION_DRAINING);
        statew_u64(w, (uint64_t)s->eof);
        statew_u64(w, (uint64_t)s->quitting);
        statew_bytes(w, s->quit_tag, s->quit_tag_len);
        statew_u64(w, (uint64_t)s->cancel_checked);
        statew_u64(w, (uint64_t)s->cancelled);
        statew_bytes(w, buf_start(&s->in), s->in.len);
        statew_bytes(w, s->parser.partial ? s->parser.partial : "", s->parser.len);
        save_output(s, w, &tmp);
        lockmgr_owner_save(ss->locks, s->owner, w);
        /* calls in the order they came: their lines form again in it */
        TAILQ_FOREACH(c, &s->calls, link) save_call(s, c, w);
        each(data, fd);
    }
    buf_free(&tmp);
}

int sessions_load(sessions_t *ss, const char *word, stater_t *r) {
    char name[STATE_WORD_MAX];
    if (strcmp(word, "sessions") == 0) {
        ss->next_id = stater_u64(r);
        ss->start_seq = stater_u64(r);
        uint64_t started = stater_u64(r);
        if (!r->err && started <= uv_now(ss->loop)) ss->started_ms = started;
        return 1;
    }
    if (strcmp(word, "scounter") == 0) {
        stater_word(r, name);
        uint64_t v = stater_u64(r);
        if (r->err) return 1;
#define XX(f) \
    if (strcmp(name, #f) == 0) ss->stats.f = v;
        XX(connections_total) XX(rejected) XX(rejected_per_uid) XX(denied) XX(requests)
        XX(errors) XX(output_overflows) XX(upgrades) XX(upgrade_failures) XX(upgrade_ms)
        XX(upgrade_state_bytes)
#undef XX
        return 1;
    }
    if (strcmp(word, "replies") == 0) {
        const char *cname;
        size_t len;
        stater_bytes(r, &cname, &len);
        proto_cmd_t cmd = len == 0 ? PROTO_CMD_NONE : proto_cmd_of(cname, len);
        if (len > 0 && cmd == PROTO_CMD_NONE) return 1; /* a verb this one lacks */
        for (int i = 0; i < SESSION_RESULTS && stater_more(r); i++)
            ss->stats.replies[cmd][i] = stater_u64(r);
        return 1;
    }
    return 0;
}

void sessions_load_peer(stater_t *r, session_peer_t *peer) {
    memset(peer, 0, sizeof(*peer));
    int64_t pid = stater_i64(r);
    uint64_t uid = stater_u64(r), gid = stater_u64(r), ngids = stater_u64(r);
    if (r->err) return;
    if (ngids > ACCESS_GROUPS_MAX || uid > UINT32_MAX || gid > UINT32_MAX || pid > INT32_MAX ||
        pid < 0) {
        stater_fail(r, "a peer is not one this dlockd knows");
        return;
    }
    peer->pid = (pid_t)pid;
    peer->uid = (uid_t)uid;
    peer->gid = (gid_t)gid;
    peer->access.uid = peer->uid;
    peer->access.ngids = (size_t)ngids;
    for (size_t g = 0; g < ngids; g++) peer->access.gids[g] = (gid_t)stater_u64(r);
}

lock_owner_t *session_owner(const session_t *s) {
    return s->owner;
}

session_t *sessions_load_conn(sessions_t *ss, uv_pipe_t *pipe, const session_peer_t *peer,
                              stater_t *r) {
    const char *in, *partial, *out, *qtag;
    size_t in_len, partial_len, out_len, qtag_len;
    uint64_t id = stater_u64(r), connected = stater_u64(r), grants = stater_u64(r),
             timeouts = stater_u64(r), draining = stater_u64(r), eof = stater_u64(r),
             quitting = stater_u64(r);
    stater_bytes(r, &qtag, &qtag_len);
    uint64_t cancel_checked = stater_u64(r), cancelled = stater_u64(r);
    stater_bytes(r, &in, &in_len);
    stater_bytes(r, &partial, &partial_len);
    stater_bytes(r, &out, &out_len);
    if (r->err) return NULL;
    if (id == 0 || id > ss->next_id || qtag_len > PROTO_TAG_MAX) {
        stater_fail(r, "a conn record is not one this dlockd knows");
        return NULL;
    }
    session_t *s = session_new(ss, pipe, peer, id);
    if (s == NULL) {
        stater_fail(r, "out of memory");
        return NULL;
    }
    s->connected_ms = connected <= uv_now(ss->loop) ? connected : uv_now(ss->loop);
    s->grants = grants;
    s->timeouts = timeouts;
    s->state = draining ? SESSION_DRAINING : SESSION_READY;
    s->eof = eof != 0;
    s->quitting = quitting != 0;
    memcpy(s->quit_tag, qtag, qtag_len);
    s->quit_tag_len = (uint8_t)qtag_len;
    s->cancel_checked = cancel_checked != 0;
    s->cancelled = cancelled != 0;
    size_t used;
    proto_request_t req;
    if (s->owner == NULL || (in_len > 0 && buf_append(&s->in, in, in_len) != 0) ||
        (out_len > 0 && buf_append(&s->out, out, out_len) != 0) ||
        (partial_len > 0 &&
         proto_feed(&s->parser, partial, partial_len, &used, &req) != PROTO_NEED_MORE)) {
        /* a partial line is one: the parser keeps it whole */
        stater_fail(r, s->owner == NULL ? "out of memory" : "a connection's input is not as kept");
        s->state = SESSION_CLOSING;
        uv_close((uv_handle_t *)s->pipe, on_close);
        return NULL;
    }
    return s;
}

void session_load_call(session_t *s, stater_t *r) {
    proto_request_t req;
    const char *cname, *tag, *name, *value;
    size_t clen, tag_len, name_len, value_len;
    memset(&req, 0, sizeof(req));
    uint64_t started = stater_u64(r), seq = stater_u64(r), started_ms = stater_u64(r);
    stater_bytes(r, &cname, &clen);
    stater_bytes(r, &tag, &tag_len);
    stater_bytes(r, &name, &name_len);
    uint64_t wait_ms = stater_u64(r), lease_ms = stater_u64(r), count = stater_u64(r);
    stater_bytes(r, &value, &value_len);
    uint64_t limit = stater_u64(r), nnames = stater_u64(r);
    if (r->err) return;
    req.cmd = proto_cmd_of(cname, clen);
    const verb_t *v = verb_of(s, req.cmd);
    if (req.cmd == PROTO_CMD_NONE || v->start == NULL || tag_len > PROTO_TAG_MAX ||
        name_len > PROTO_NAME_MAX || value_len > PROTO_VALUE_MAX || nnames > PROTO_MNAMES_MAX ||
        wait_ms > UINT32_MAX || lease_ms > UINT32_MAX || count > UINT32_MAX ||
        limit > UINT32_MAX || (tag_len > 0 && call_by_tag(s, tag, tag_len) != NULL) ||
        (tag_len == 0 && s->untagged != NULL)) {
        stater_fail(r, "a call record is not one this dlockd knows");
        return;
    }
    memcpy(req.tag, tag, tag_len);
    req.tag_len = (uint8_t)tag_len;
    memcpy(req.name, name, name_len);
    req.name_len = name_len;
    memcpy(req.value, value, value_len);
    req.value_len = value_len;
    req.wait_ms = (uint32_t)wait_ms;
    req.lease_ms = (uint32_t)lease_ms;
    req.count = (uint32_t)count;
    req.limit = (uint32_t)limit;
    if (nnames > 0) {
        const char *ns[PROTO_MNAMES_MAX];
        size_t lens[PROTO_MNAMES_MAX], total = 0;
        for (uint64_t i = 0; i < nnames; i++) {
            stater_bytes(r, &ns[i], &lens[i]);
            if (lens[i] == 0 || lens[i] > PROTO_NAME_MAX) stater_fail(r, "a name is too long");
            total += lens[i] + 1;
        }
        if (r->err) return;
        if (total > UINT16_MAX || (req.mnames = malloc(total)) == NULL) {
            stater_fail(r, "a call's names do not fit");
            return;
        }
        size_t off = 0;
        for (uint64_t i = 0; i < nnames; i++) {
            memcpy(req.mnames + off, ns[i], lens[i]);
            req.mnames[off + lens[i]] = '\0';
            req.moff[i] = (uint16_t)off;
            req.mlen[i] = (uint8_t)lens[i];
            off += lens[i] + 1;
        }
        req.nnames = (unsigned)nnames;
    }
    call_t *c = call_new(s, &req); /* it takes the names */
    proto_request_free(&req);
    if (c == NULL) {
        stater_fail(r, "out of memory");
        return;
    }
    c->restart = started != 0;
    c->start_seq = seq;
    c->started_ms = started_ms;
}

static int by_start_seq(const void *a, const void *b) {
    const call_t *x = *(call_t *const *)a, *y = *(call_t *const *)b;
    return x->start_seq < y->start_seq ? -1 : x->start_seq > y->start_seq;
}

/* What is left of a TRY wait started at started_ms: at least 1 ms, so
 * that it stays a wait (0 is one try). */
static uint32_t wait_left(uint32_t wait_ms, uint64_t started_ms, uint64_t now) {
    uint64_t spent = now > started_ms ? now - started_ms : 0;
    return spent + 1 >= wait_ms ? 1 : (uint32_t)(wait_ms - spent);
}

void sessions_resume(sessions_t *ss) {
    session_t *s;
    call_t *c, **all = NULL;
    size_t n = 0, cap = 0;
    uint64_t now = uv_now(ss->loop);
    ss->frozen = 0;
    LIST_FOREACH(s, &ss->all, all) {
        TAILQ_FOREACH(c, &s->calls, link) {
            if (!c->restart) continue;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                call_t **grown = realloc(all, ncap * sizeof(*all));
                if (grown == NULL) break;
                all = grown;
                cap = ncap;
            }
            all[n++] = c;
        }
    }
    if (n > 0) qsort(all, n, sizeof(*all), by_start_seq);
    /* Each asks again as the first time, in the order they first came:
     * the local queues form again in it, and Redis's places are the
     * owners'. */
    for (size_t i = 0; i < n; i++) {
        c = all[i];
        c->restart = 0;
        if (c->s->state == SESSION_CLOSING) continue;
        if ((verb_of(c->s, c->req.cmd)->flags & LOCK_WORD_TRY) && c->req.wait_ms > 0)
            c->req.wait_ms = wait_left(c->req.wait_ms, c->started_ms, now);
        c->s->cmd = c->req.cmd;
        call_start(c);
    }
    free(all);
    LIST_FOREACH(s, &ss->all, all) {
        if (s->state == SESSION_CLOSING) continue;
        if (reads(s)) uv_read_start((uv_stream_t *)s->pipe, on_alloc, on_read);
        else deaf_add(s);
        s->unpark = 1;
        /* Only what has something to do is driven: 10,000 idle connections
         * would hold up the first request served. */
        if (s->out.len > 0 || s->in.len > 0 || s->nparked > 0 || s->eof ||
            s->state == SESSION_DRAINING)
            mark_dirty(s);
    }
}
