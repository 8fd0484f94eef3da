/* Prometheus metrics: GET /metrics over HTTP (libmicrohttpd), on TCP or a Unix socket.
 * SPDX-License-Identifier: MIT
 *
 * libmicrohttpd runs without threads of its own: it keeps its sockets in an
 * epoll set, whose descriptor libuv polls; MHD_run() does the work when it
 * is readable, and a timer covers MHD's connection timeouts. A scrape reads
 * the counters of the sessions, the lock manager and the backend's nodes
 * and renders them in the text exposition format (version 0.0.4). */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <strings.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/queue.h>
#include <unistd.h>

#include "daemon/board.h"
#include "daemon/listfmt.h"
#include "daemon/listing.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "proto/proto.h"

struct metrics_s {
    uv_loop_t *loop;
    sessions_t *sessions;
    lockmgr_t *locks;
    backend_t *backend;
    struct MHD_Daemon *mhd;
    int fd;                   /* the listening socket, MHD's to use */
    char path[CONF_PATH_MAX + 1]; /* a Unix socket to remove at the end, or "" */
    uv_poll_t *poll;
    uv_timer_t *timer;
    int board_ok;             /* serve GET / and /locks: loopback, a Unix
                                 socket, or board_remote = yes */
    int board_remote;         /* board_remote = yes */
    int check_host;           /* TCP: GET / and /locks must name one of ours */
    char listen_host[CONF_STR_MAX]; /* the metrics address's host ([] taken off) */
    LIST_HEAD(, hreq_s) reqs; /* /locks listings in flight (suspended) */
};

/* One GET /locks: suspended while its listing runs. */
typedef struct hreq_s {
    metrics_t *m;
    struct MHD_Connection *conn;
    listing_t *listing;
    int done;
    unsigned status;
    buf_t body;
    char pattern[PROTO_NAME_MAX + 1];
    size_t limit;
    LIST_ENTRY(hreq_s) link;
} hreq_t;

/* ---- rendering -------------------------------------------------------------- */

/* Appends printf-style text; a failed append is caught by out->failed. */
typedef struct out_s {
    buf_t buf;
    int failed;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line) || buf_append(&o->buf, line, (size_t)n) != 0)
        o->failed = 1;
}

static void head(out_t *o, const char *name, const char *type, const char *help) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newlines escaped, into out (cap > 0). */
static const char *label_value(char *out, size_t cap, const char *v) {
    size_t k = 0;
    for (; *v && k + 2 < cap; v++) {
        if (*v == '\\' || *v == '"') out[k++] = '\\';
        if (*v == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
            continue;
        }
        out[k++] = *v;
    }
    out[k] = '\0';
    return out;
}

static void lower(char *out, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 1 < cap; s++) out[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
    out[k] = '\0';
}

/* One histogram's series; labels is "" or `name="value",` pairs ending in
 * a comma. */
static void histogram(out_t *o, const char *name, const char *labels, const histo_t *h) {
    uint64_t cum = 0;
    for (size_t i = 0; i < HISTO_BUCKETS - 1; i++) {
        cum += h->count[i];
        put(o, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels,
            (double)histo_bounds_us[i] / 1e6, (unsigned long long)cum);
    }
    put(o, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)h->n);
    size_t ll = strlen(labels);
    if (ll > 0) { /* the labels again, without the trailing comma */
        put(o, "%s_sum{%.*s} %.6f\n", name, (int)ll - 1, labels, (double)h->sum_us / 1e6);
        put(o, "%s_count{%.*s} %llu\n", name, (int)ll - 1, labels, (unsigned long long)h->n);
    } else {
        put(o, "%s_sum %.6f\n", name, (double)h->sum_us / 1e6);
        put(o, "%s_count %llu\n", name, (unsigned long long)h->n);
    }
}

typedef struct node_pass_s {
    out_t *o;
    int rtt;                  /* 0: up gauge, 1: round-trip histogram */
} node_pass_t;

static void on_node(void *data, const backend_node_info_t *node) {
    node_pass_t *p = data;
    char name[512], labels[600];
    label_value(name, sizeof(name), node->name);
    snprintf(labels, sizeof(labels), "node=\"%s\",role=\"%s\",", name, node->role);
    if (!p->rtt)
        put(p->o, "dlockd_redis_node_up{node=\"%s\",role=\"%s\"} %d\n", name, node->role,
            node->up);
    else
        histogram(p->o, "dlockd_redis_rtt_seconds", labels, node->rtt);
}

static void counter(out_t *o, const char *name, const char *help, uint64_t v) {
    head(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(out_t *o, const char *name, const char *help, uint64_t v) {
    head(o, name, "gauge", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

int metrics_render(sessions_t *sessions, lockmgr_t *locks, backend_t *backend, buf_t *out) {
    static const char *const losses[] = {"expired", "forced", "backend"};
    sessions_stats_t ss;
    lockmgr_stats_t ls;
    lockmgr_elect_stats_t es;
    out_t o = {.buf = *out};
    char verb[32], result[32];

    sessions_stats(sessions, &ss);
    lockmgr_stats(locks, &ls);
    lockmgr_elect_stats(locks, &es);

    head(&o, "dlockd_build_info", "gauge", "dlockd's version, always 1.");
    put(&o, "dlockd_build_info{version=\"%s\"} 1\n", DLOCKD_VERSION);
    gauge(&o, "dlockd_uptime_seconds", "Seconds since dlockd started.", ss.uptime_s);

    head(&o, "dlockd_requests_total", "counter",
         "Requests answered, by verb and result (ok, timeout, or the ERR code).");
    for (int c = 0; c < PROTO_CMD_COUNT; c++) {
        if (c == PROTO_CMD_NONE) snprintf(verb, sizeof(verb), "unknown");
        else lower(verb, sizeof(verb), proto_cmd_name((proto_cmd_t)c));
        for (int r = 0; r < SESSION_RESULTS; r++) {
            if (ss.replies[c][r] == 0) continue; /* absent series read as 0 */
            if (r == SESSION_RESULT_OK) snprintf(result, sizeof(result), "ok");
            else if (r == SESSION_RESULT_TIMEOUT) snprintf(result, sizeof(result), "timeout");
            else lower(result, sizeof(result), proto_err_name((proto_err_t)(r - 1)));
            put(&o, "dlockd_requests_total{verb=\"%s\",result=\"%s\"} %llu\n", verb, result,
                (unsigned long long)ss.replies[c][r]);
        }
    }
    counter(&o, "dlockd_grants_total", "New grants (fences handed out).", ls.grants);
    counter(&o, "dlockd_reentries_total", "Reentrant grants.", ls.reentries);
    counter(&o, "dlockd_releases_total", "Locks released.", ls.releases);
    counter(&o, "dlockd_timeouts_total", "TRYLOCKs that timed out.", ls.timeouts);
    head(&o, "dlockd_lost_total", "counter", "!LOST events sent, by reason.");
    for (int i = 0; i < 3; i++)
        put(&o, "dlockd_lost_total{reason=\"%s\"} %llu\n", losses[i],
            (unsigned long long)ls.lost_by[i]);
    counter(&o, "dlockd_renewals_total", "Locks renewed by the watchdog.", ls.renewals);
    counter(&o, "dlockd_backend_errors_total", "Requests answered ERR BACKEND.",
            ls.backend_errors);
    counter(&o, "dlockd_connections_accepted_total", "Client connections accepted.",
            ss.connections_total);
    counter(&o, "dlockd_connections_rejected_total",
            "Client connections refused at max_clients or max_clients_per_uid.", ss.rejected);
    counter(&o, "dlockd_connections_rejected_per_uid_total",
            "Client connections refused at max_clients_per_uid.", ss.rejected_per_uid);
    counter(&o, "dlockd_access_denied_total", "Requests answered ERR DENIED by the [access] rules.",
            ss.denied);
    counter(&o, "dlockd_output_overflows_total",
            "Clients cut off for not reading max_output bytes of replies.", ss.output_overflows);
    counter(&o, "dlockd_upgrades_total",
            "Live restores (SIGUSR2 hand-overs to a new process) since the first start.",
            ss.upgrades);
    counter(&o, "dlockd_upgrade_failures_total",
            "Hand-overs that failed, the old process serving on.", ss.upgrade_failures);
    head(&o, "dlockd_upgrade_seconds", "gauge", "The last hand-over's time, signal to serving.");
    put(&o, "dlockd_upgrade_seconds %.3f\n", (double)ss.upgrade_ms / 1000.0);
    gauge(&o, "dlockd_upgrade_state_bytes", "The last hand-over's state size.",
          ss.upgrade_state_bytes);

    gauge(&o, "dlockd_connections", "Client connections open.", ss.connections);
    gauge(&o, "dlockd_locks_held", "Holds this daemon's clients have.", ls.locks_held);
    gauge(&o, "dlockd_waiters", "Requests waiting for a lock.", ls.waiters);
    gauge(&o, "dlockd_backend_up", "1 while the backend can take requests.",
          (uint64_t)ls.backend_up);
    gauge(&o, "dlockd_election_candidates", "ELECTs waiting here.", es.candidates);
    gauge(&o, "dlockd_observers", "OBSERVEs in force, all connections.", es.observers);
    gauge(&o, "dlockd_observed_names", "Names observed (one watch each).", es.observed);
    counter(&o, "dlockd_leader_events_total", "!LEADER events sent.", es.leader_events);
    head(&o, "dlockd_redis_node_up", "gauge", "1 while dlockd's connection to the node is up.");
    node_pass_t pass = {.o = &o, .rtt = 0};
    backend_nodes(backend, on_node, &pass);

    head(&o, "dlockd_wait_seconds", "histogram", "From LOCK or TRYLOCK to a new grant.");
    histogram(&o, "dlockd_wait_seconds", "", ls.wait_time);
    head(&o, "dlockd_hold_seconds", "histogram", "From a new grant to the end of the hold.");
    histogram(&o, "dlockd_hold_seconds", "", ls.hold_time);
    head(&o, "dlockd_redis_rtt_seconds", "histogram",
         "Script calls to a Redis node, from sent to answered.");
    pass.rtt = 1;
    backend_nodes(backend, on_node, &pass);

    *out = o.buf;
    return o.failed ? -1 : 0;
}

/* ---- HTTP ------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             void *body, size_t len, enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (r == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static void run_mhd(metrics_t *m);

static enum MHD_Result json_error(struct MHD_Connection *conn, unsigned status, const char *why) {
    buf_t b = {0};
    if (buf_append(&b, "{\"error\":", 9) != 0 || listfmt_json_str(&b, why, strlen(why)) != 0 ||
        buf_append(&b, "}\n", 2) != 0) {
        buf_free(&b);
        return MHD_NO;
    }
    return reply(conn, status, "application/json", b.data, b.len, MHD_RESPMEM_MUST_FREE);
}

static uint64_t wall_ms(void) {
    uv_timeval64_t tv;
    if (uv_gettimeofday(&tv) != 0) return 0;
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* The latest !LOST events, newest first, closing the /locks object. */
static int put_lost(buf_t *b, const listing_ring_t *ring) {
    char x[160];
    int n = snprintf(x, sizeof(x), ",\"now_ms\":%llu,\"lost\":[", (unsigned long long)wall_ms());
    if (buf_append(b, x, (size_t)n) != 0) return -1;
    const listing_lost_t *e;
    for (size_t i = 0; (e = listing_ring_get(ring, i)) != NULL; i++) {
        n = snprintf(x, sizeof(x), "%s{\"at_ms\":%llu,\"reason\":\"%s\",\"pid\":%lld,\"uid\":%lld,"
                     "\"name\":", i ? "," : "", (unsigned long long)e->at_ms, e->reason, e->pid,
                     e->uid);
        if (buf_append(b, x, (size_t)n) != 0 || listfmt_json_str(b, e->name, strlen(e->name)) ||
            buf_append(b, "}", 1) != 0)
            return -1;
    }
    return buf_append(b, "]}\n", 3);
}

static void on_listed(void *data, list_result_t *res) {
    hreq_t *h = data;
    h->listing = NULL;
    h->done = 1;
    if (res->status != BACKEND_OK) {
        h->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        if (buf_append(&h->body, "{\"error\":", 9) != 0 ||
            listfmt_json_str(&h->body, res->error, strlen(res->error)) != 0 ||
            buf_append(&h->body, "}\n", 2) != 0)
            h->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    } else {
        h->status = MHD_HTTP_OK;
        if (listfmt_json(&h->body, res->entries, res->n, res->more, h->limit, h->pattern) != 0 ||
            put_lost(&h->body, sessions_lost(h->m->sessions)) != 0)
            h->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    MHD_resume_connection(h->conn);
    run_mhd(h->m);
}

/* GET /locks?pattern=...&limit=...: starts the listing, suspended. */
static enum MHD_Result start_locks(metrics_t *m, struct MHD_Connection *conn, void **con_cls) {
    const char *pat = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pattern");
    const char *lim = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
    if (pat == NULL || pat[0] == '\0') pat = "*";
    if (!proto_name_valid(pat, strlen(pat)))
        return json_error(conn, MHD_HTTP_BAD_REQUEST, "pattern: 1-255 bytes of 0x21-0x7E");
    uint32_t limit = PROTO_LIST_DEFAULT;
    if (lim != NULL &&
        (proto_parse_num(lim, strlen(lim), &limit) != 0 || limit < 1 || limit > PROTO_LIST_MAX))
        return json_error(conn, MHD_HTTP_BAD_REQUEST, "limit: 1 to 1000");
    hreq_t *h = calloc(1, sizeof(*h));
    if (h == NULL) return json_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    h->m = m;
    h->conn = conn;
    h->limit = limit;
    snprintf(h->pattern, sizeof(h->pattern), "%s", pat);
    h->listing = listing_start(sessions_locks(m->sessions), h->pattern, strlen(h->pattern),
                               limit, NULL, on_listed, h);
    if (h->listing == NULL) {
        free(h);
        return json_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    LIST_INSERT_HEAD(&m->reqs, h, link);
    *con_cls = h;
    MHD_suspend_connection(conn);
    return MHD_YES;
}

static enum MHD_Result finish_locks(metrics_t *m, struct MHD_Connection *conn, hreq_t *h,
                                    void **con_cls) {
    LIST_REMOVE(h, link);
    *con_cls = m;
    buf_t b = h->body;
    unsigned status = h->status;
    free(h);
    if (b.data == NULL) return MHD_NO;
    return reply(conn, status, "application/json", b.data, b.len, MHD_RESPMEM_MUST_FREE);
}

static int is_loopback(const conf_t *conf) {
    const char *h = conf->metrics_addr.host;
    if (conf->metrics_addr.port == 0) return 1; /* a Unix socket: its mode guards it */
    return strncmp(h, "127.", 4) == 0 || strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0 ||
           strcmp(h, "[::1]") == 0;
}

/* 1 if a request's Host is one of the board's own names, with or without a
 * port: "localhost", a loopback address (127.0.0.0/8, [::1]) or the
 * metrics address's host; with board_remote, any address too. A web page
 * elsewhere reaches a loopback listener through the browser by DNS
 * rebinding (its own name made to resolve to 127.0.0.1), and then sends
 * its own name: an address cannot be rebound, and browsers resolve
 * localhost themselves. No Host (HTTP/1.0): no browser sent it. */
static int host_is_ours(const metrics_t *m, const char *host) {
    char name[256];
    const char *at = host, *port = NULL;
    size_t len;
    int v6 = 0;
    if (host == NULL || host[0] == '\0') return 1;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (end == NULL || (end[1] != '\0' && end[1] != ':')) return 0;
        at = host + 1;
        len = (size_t)(end - at);
        port = end[1] == ':' ? end + 2 : NULL;
        v6 = 1;
    } else {
        const char *colon = strchr(host, ':');
        len = colon ? (size_t)(colon - host) : strlen(host);
        port = colon ? colon + 1 : NULL;
    }
    if (len == 0 || len >= sizeof(name)) return 0;
    if (port != NULL && (port[0] == '\0' || strlen(port) > 5 ||
                         strspn(port, "0123456789") != strlen(port)))
        return 0;
    memcpy(name, at, len);
    name[len] = '\0';
    struct in_addr a4;
    struct in6_addr a6;
    if (v6) {
        if (inet_pton(AF_INET6, name, &a6) != 1) return 0;
        if (IN6_IS_ADDR_LOOPBACK(&a6) || m->board_remote) return 1;
    } else if (inet_pton(AF_INET, name, &a4) == 1) {
        if ((ntohl(a4.s_addr) >> 24) == 127 || m->board_remote) return 1;
    } else if (strcasecmp(name, "localhost") == 0) {
        return 1;
    }
    return strcasecmp(name, m->listen_host) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size,
                                  void **con_cls) {
    static char not_found[] = "not found: try /metrics, /locks or /\n";
    static char not_allowed[] = "only GET\n";
    static char no_memory[] = "out of memory\n";
    metrics_t *m = cls;
    (void)version;
    (void)upload_data;
    if (*con_cls == NULL) { /* the headers: answer once the request is whole */
        *con_cls = m;
        return MHD_YES;
    }
    if (*con_cls != m) { /* a /locks listing: resumed with its answer */
        hreq_t *h = *con_cls;
        if (!h->done) return MHD_YES;
        return finish_locks(m, conn, h, con_cls);
    }
    if (*upload_size != 0) {
        *upload_size = 0; /* a body is read and ignored */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", not_allowed,
                     sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/locks") == 0 || strcmp(url, "/") == 0) {
        if (!m->board_ok)
            return json_error(conn, MHD_HTTP_FORBIDDEN,
                              "the board is served on loopback only (set board_remote)");
        /* 421 Misdirected Request, not 403: the client is not refused (with
         * one of our names it is served), the name it asked for is not ours. */
        if (m->check_host &&
            !host_is_ours(m, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                          MHD_HTTP_HEADER_HOST)))
            return json_error(conn, MHD_HTTP_MISDIRECTED_REQUEST,
                              "the board answers to localhost, a loopback address or the "
                              "metrics address only (a web page's own name: DNS rebinding?)");
        if (strcmp(url, "/locks") == 0) return start_locks(m, conn, con_cls);
        return reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", (void *)(uintptr_t)board_html,
                     board_html_len, MHD_RESPMEM_PERSISTENT);
    }
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", not_found, sizeof(not_found) - 1,
                     MHD_RESPMEM_PERSISTENT);
    buf_t b = {0};
    if (metrics_render(m->sessions, m->locks, m->backend, &b) != 0) {
        buf_free(&b);
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", no_memory,
                     sizeof(no_memory) - 1, MHD_RESPMEM_PERSISTENT);
    }
    /* MHD frees the body; buf_t's data is from malloc, with off 0 here. */
    return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len,
                 MHD_RESPMEM_MUST_FREE);
}

static void on_timer(uv_timer_t *t);

static void run_mhd(metrics_t *m) {
    MHD_run(m->mhd);
    uv_timer_stop(m->timer);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(m->mhd, &ms) == MHD_YES)
        uv_timer_start(m->timer, on_timer, ms > METRICS_TICK_MAX_MS ? METRICS_TICK_MAX_MS : ms, 0);
}

static void on_timer(uv_timer_t *t) {
    run_mhd(t->data);
}

static void on_poll(uv_poll_t *p, int status, int events) {
    (void)status;
    (void)events;
    run_mhd(p->data);
}

/* ---- the listening socket --------------------------------------------------------- */

static int listen_unix(metrics_t *m, const char *path, char *err, size_t errlen) {
    struct sockaddr_un sa;
    struct stat st;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t plen = strlen(path); /* conf keeps it within CONF_PATH_MAX */
    if (plen >= sizeof(sa.sun_path) || plen >= sizeof(m->path)) {
        snprintf(err, errlen, "metrics socket path too long");
        return -1;
    }
    memcpy(sa.sun_path, path, plen + 1);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "metrics %s: exists and is not a socket", path);
            return -1;
        }
        unlink(path); /* a stale one of ours; the main socket guards against a live dlockd */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, METRICS_BACKLOG) != 0) {
        snprintf(err, errlen, "metrics %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    memcpy(m->path, path, plen + 1);
    return fd;
}

static int listen_tcp(const conf_addr_t *a, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL;
    char port[16];
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(port, sizeof(port), "%d", a->port);
    int rc = getaddrinfo(a->host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "metrics %s:%d: %s", a->host, a->port, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, METRICS_BACKLOG) != 0) {
        snprintf(err, errlen, "metrics %s:%d: %s", a->host, a->port, strerror(errno));
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* ---- life ---------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h) {
    free(h);
}

metrics_t *metrics_start(uv_loop_t *loop, const conf_t *conf, sessions_t *sessions,
                         lockmgr_t *locks, backend_t *backend, int fd, char *err, size_t errlen) {
    metrics_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->loop = loop;
    m->sessions = sessions;
    m->locks = locks;
    m->backend = backend;
    if (fd >= 0) {
        m->fd = fd;
        size_t plen = strlen(conf->metrics);
        if (conf->metrics_addr.port == 0 && plen < sizeof(m->path))
            memcpy(m->path, conf->metrics, plen + 1); /* removed at its stop */
    } else {
        m->fd = conf->metrics_addr.port == 0 ? listen_unix(m, conf->metrics, err, errlen)
                                             : listen_tcp(&conf->metrics_addr, err, errlen);
    }
    if (m->fd < 0) {
        free(m);
        return NULL;
    }
    m->board_ok = is_loopback(conf) || conf->board_remote;
    m->board_remote = conf->board_remote;
    m->check_host = conf->metrics_addr.port != 0; /* a Unix socket: no browser */
    snprintf(m->listen_host, sizeof(m->listen_host), "%s", conf->metrics_addr.host);
    LIST_INIT(&m->reqs);
    m->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_request, m,
                              MHD_OPTION_LISTEN_SOCKET, m->fd,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONN_MAX,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_IDLE_S,
                              MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        m->mhd ? MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    m->poll = malloc(sizeof(*m->poll));
    m->timer = malloc(sizeof(*m->timer));
    if (info == NULL || m->poll == NULL || m->timer == NULL ||
        uv_poll_init(loop, m->poll, info->epoll_fd) != 0) {
        snprintf(err, errlen, "metrics: cannot start the HTTP server");
        if (m->mhd) MHD_stop_daemon(m->mhd);
        close(m->fd);
        if (m->path[0]) unlink(m->path);
        free(m->poll);
        free(m->timer);
        free(m);
        return NULL;
    }
    m->poll->data = m;
    uv_timer_init(loop, m->timer);
    m->timer->data = m;
    uv_poll_start(m->poll, UV_READABLE, on_poll);
    log_info("metrics on %s (GET /metrics%s)", conf->metrics,
             m->board_ok ? ", /locks and the board at /" : "; no board: not loopback");
    return m;
}

int metrics_fd(const metrics_t *m) {
    return m->fd;
}

void metrics_stop(metrics_t *m) {
    if (m == NULL) return;
    uv_poll_stop(m->poll);
    uv_close((uv_handle_t *)m->poll, on_handle_closed);
    uv_close((uv_handle_t *)m->timer, on_handle_closed);
    /* Listings in flight: MHD stops only with every connection resumed. */
    hreq_t *h;
    while ((h = LIST_FIRST(&m->reqs)) != NULL) {
        LIST_REMOVE(h, link);
        if (h->listing) listing_cancel(h->listing);
        MHD_resume_connection(h->conn);
        buf_free(&h->body);
        free(h);
    }
    MHD_stop_daemon(m->mhd);
    close(m->fd);
    if (m->path[0]) unlink(m->path);
    free(m);
}
