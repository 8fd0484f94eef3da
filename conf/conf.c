/* Loading and checking the dlockd configuration file.
 * SPDX-License-Identifier: MIT */
#include "conf.h"

#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <grp.h>

#define CONF_NUM_MAX 2147483647u

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (err == NULL || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Strict unsigned decimal in [min, max]. */
static int parse_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out,
                     char *err, size_t errlen) {
    uint64_t n = 0;
    if (*v == '\0') {
        seterr(err, errlen, "empty value, expected a number from %u to %u", min, max);
        return -1;
    }
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9') {
            seterr(err, errlen, "'%s' is not a number (digits only)", v);
            return -1;
        }
        n = n * 10 + (uint64_t)(*p - '0');
        if (n > CONF_NUM_MAX) break;
    }
    if (n < min || n > max) {
        seterr(err, errlen, "%s is out of range %u..%u", v, min, max);
        return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

static int parse_mode(const char *v, unsigned *out, char *err, size_t errlen) {
    unsigned n = 0;
    if (*v == '\0' || strlen(v) > 4) goto bad;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '7') goto bad;
        n = n * 8 + (unsigned)(*p - '0');
    }
    if (n > 0777) goto bad;
    *out = n;
    return 0;
bad:
    seterr(err, errlen, "'%s' is not an octal mode from 0 to 0777", v);
    return -1;
}

static int parse_uids(conf_t *c, const char *v, char *err, size_t errlen) {
    uid_t uids[CONF_ADMIN_UIDS_MAX];
    size_t n = 0;
    const char *p = v;

    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (*p == '\0') break;
        char word[16];
        size_t len = strcspn(p, " ,\t");
        if (len >= sizeof(word)) {
            seterr(err, errlen, "'%.*s' is not a uid", (int)len, p);
            return -1;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        uint32_t uid;
        if (parse_u32(word, 0, CONF_NUM_MAX, &uid, err, errlen) != 0) return -1;
        if (n == CONF_ADMIN_UIDS_MAX) {
            seterr(err, errlen, "more than %d admin uids", CONF_ADMIN_UIDS_MAX);
            return -1;
        }
        uids[n++] = (uid_t)uid;
        p += len;
    }
    memcpy(c->admin_uids, uids, n * sizeof(uid_t));
    c->admin_uids_count = n;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *v, const char *what,
                    char *err, size_t errlen) {
    size_t len = strlen(v);
    if (len >= cap) {
        seterr(err, errlen, "%s is longer than %zu bytes", what, cap - 1);
        return -1;
    }
    memcpy(dst, v, len + 1);
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes src[0..len) into dst (NUL-terminated, at most cap bytes).
 * An escape is exactly two hex digits and may not decode to NUL. */
static int url_decode(char *dst, size_t cap, const char *src, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = src[i];
        if (ch == '%') {
            if (i + 2 >= len) return -1;
            int hi = hexval(src[i + 1]), lo = hexval(src[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return -1;
            ch = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= cap) return -1;
        dst[o++] = ch;
    }
    dst[o] = '\0';
    return 0;
}

/* The url for messages, with any user:password replaced by "***". */
static const char *redact_url(const char *url, char *out, size_t cap) {
    const char *rest = strncmp(url, "redis://", 8) == 0    ? url + 8
                       : strncmp(url, "rediss://", 9) == 0 ? url + 9
                                                           : NULL;
    if (rest == NULL) return url;
    const char *slash = strchr(rest, '/');
    const char *at = NULL;
    for (const char *q = rest; *q && (slash == NULL || q < slash); q++)
        if (*q == '@') at = q;
    if (at == NULL) return url;
    snprintf(out, cap, "%.*s***@%s", (int)(rest - url), url, at + 1);
    return out;
}

int conf_parse_url(conf_url_t *u, const char *url, char *err, size_t errlen) {
    char shown[CONF_STR_MAX + 16];
    char host[CONF_STR_MAX] = "", user[CONF_STR_MAX] = "", pass[CONF_STR_MAX] = "";
    uint32_t port = 6379, db = 0;
    conf_redis_kind_t kind;
    int tls = 0;

    if (strlen(url) >= CONF_STR_MAX) {
        seterr(err, errlen, "url is longer than %d bytes", CONF_STR_MAX - 1);
        return -1;
    }
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        const char *q = strchr(path, '?');
        size_t plen = q ? (size_t)(q - path) : strlen(path);
        kind = CONF_REDIS_UNIX;
        if (plen == 0 || path[0] != '/' || plen > CONF_PATH_MAX) {
            seterr(err, errlen, "'%s': expected unix:///absolute/path[?db=N]",
                   redact_url(url, shown, sizeof(shown)));
            return -1;
        }
        memcpy(host, path, plen);
        host[plen] = '\0';
        if (q != NULL) {
            if (strncmp(q, "?db=", 4) != 0 ||
                parse_u32(q + 4, 0, 1000000, &db, err, errlen) != 0) {
                seterr(err, errlen, "'%s': expected unix:///absolute/path[?db=N]",
                   redact_url(url, shown, sizeof(shown)));
                return -1;
            }
        }
    } else if (strncmp(url, "redis://", 8) == 0 || strncmp(url, "rediss://", 9) == 0) {
        tls = url[5] == 's';
        const char *p = url + (tls ? 9 : 8);
        /* Credentials end at the last '@' before the path. */
        const char *path = strchr(p, '/');
        const char *at = NULL;
        for (const char *q = p; *q && (path == NULL || q < path); q++)
            if (*q == '@') at = q;
        kind = CONF_REDIS_TCP;
        if (at != NULL) {
            const char *colon = memchr(p, ':', (size_t)(at - p));
            size_t ulen = colon ? (size_t)(colon - p) : (size_t)(at - p);
            if (url_decode(user, sizeof(user), p, ulen) != 0 ||
                (colon && url_decode(pass, sizeof(pass), colon + 1,
                                     (size_t)(at - colon - 1)) != 0)) {
                seterr(err, errlen, "bad user or password in redis url");
                return -1;
            }
            p = at + 1;
        }
        const char *slash = strchr(p, '/');
        size_t hlen = slash ? (size_t)(slash - p) : strlen(p);
        const char *colon = NULL;
        if (hlen > 0 && p[0] == '[') { /* [v6 address]:port */
            const char *rb = memchr(p, ']', hlen);
            if (rb == NULL) goto bad_url;
            memcpy(host, p + 1, (size_t)(rb - p - 1));
            host[rb - p - 1] = '\0';
            if (rb + 1 < p + hlen) {
                if (rb[1] != ':') goto bad_url;
                colon = rb + 1;
            }
        } else {
            colon = memchr(p, ':', hlen);
            size_t n = colon ? (size_t)(colon - p) : hlen;
            memcpy(host, p, n);
            host[n] = '\0';
        }
        if (host[0] == '\0') goto bad_url;
        if (colon != NULL) {
            char num[16];
            size_t n = (size_t)(p + hlen - colon - 1);
            if (n == 0 || n >= sizeof(num)) goto bad_url;
            memcpy(num, colon + 1, n);
            num[n] = '\0';
            if (parse_u32(num, 1, 65535, &port, err, errlen) != 0) goto bad_url;
        }
        if (slash != NULL && slash[1] != '\0' &&
            parse_u32(slash + 1, 0, 1000000, &db, err, errlen) != 0)
            goto bad_url;
    } else {
        seterr(err, errlen, "'%s': expected redis[s]://[user[:password]@]host[:port][/db] "
               "or unix:///path[?db=N]", redact_url(url, shown, sizeof(shown)));
        return -1;
    }

    u->kind = kind;
    u->tls = tls;
    memcpy(u->host, host, sizeof(host));
    u->port = (int)port;
    u->db = (int)db;
    memcpy(u->username, user, sizeof(user));
    memcpy(u->password, pass, sizeof(pass));
    return 0;

bad_url:
    seterr(err, errlen, "'%s': expected redis[s]://[user[:password]@]host[:port][/db]",
           redact_url(url, shown, sizeof(shown)));
    return -1;
}

int conf_parse_redis_url(conf_t *c, const char *url, char *err, size_t errlen) {
    conf_url_t u;
    if (conf_parse_url(&u, url, err, errlen) != 0) return -1;
    c->redis_kind = u.kind;
    c->url_tls = u.tls;
    memcpy(c->redis_host, u.host, sizeof(u.host));
    c->redis_port = u.port;
    c->redis_db = u.db;
    memcpy(c->url, url, strlen(url) + 1);
    if (!c->username_set) memcpy(c->username, u.username, sizeof(u.username));
    if (!c->password_set) memcpy(c->password, u.password, sizeof(u.password));
    return 0;
}

/* quorum: URLs separated by spaces, CONF_QUORUM_MIN to CONF_QUORUM_MAX of
 * them. Empty: none. */
static int parse_quorum(conf_t *c, const char *v, char *err, size_t errlen) {
    conf_url_t urls[CONF_QUORUM_MAX];
    char one[CONF_STR_MAX], why[CONF_ERR_LEN];
    size_t n = 0;
    const char *p = v;
    memset(urls, 0, sizeof(urls)); /* reload compares them whole */
    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0') break;
        size_t len = strcspn(p, " \t");
        if (n == CONF_QUORUM_MAX) {
            seterr(err, errlen, "quorum has more than %d nodes", CONF_QUORUM_MAX);
            return -1;
        }
        if (len >= sizeof(one)) {
            seterr(err, errlen, "quorum node %zu: url is longer than %d bytes", n + 1,
                   CONF_STR_MAX - 1);
            return -1;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        if (conf_parse_url(&urls[n], one, why, sizeof(why)) != 0) {
            seterr(err, errlen, "quorum node %zu: %s", n + 1, why);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (urls[i].kind == urls[n].kind && urls[i].port == urls[n].port &&
                strcmp(urls[i].host, urls[n].host) == 0) {
                seterr(err, errlen, "quorum nodes %zu and %zu are the same server: a quorum "
                       "needs independent ones", i + 1, n + 1);
                return -1;
            }
        }
        n++;
        p += len;
    }
    if (n > 0 && n < CONF_QUORUM_MIN) {
        seterr(err, errlen, "quorum needs at least %d independent nodes (it has %zu): with "
               "fewer, losing one loses the majority", CONF_QUORUM_MIN, n);
        return -1;
    }
    memcpy(c->quorum, urls, n * sizeof(urls[0]));
    c->quorum_count = n;
    return 0;
}

uint32_t conf_clock_drift(const conf_t *c, uint32_t lease_ms) {
    if (c->clock_drift_ms != CONF_DRIFT_AUTO) return c->clock_drift_ms;
    return lease_ms / 100 + 2;
}

int conf_warning(const conf_t *c, char *out, size_t cap) {
    if (c->quorum_count > 0 && c->quorum_count % 2 == 0) {
        snprintf(out, cap, "quorum of %zu nodes is even: its majority is %zu, so it survives "
                 "the loss of %zu, as %zu nodes would", c->quorum_count,
                 c->quorum_count / 2 + 1, c->quorum_count / 2 - 1, c->quorum_count - 1);
        return 1;
    }
    return 0;
}

/* "" (off), "host:port", "[ipv6]:port" or an absolute Unix socket path. */
static int parse_metrics(conf_t *c, const char *v, char *err, size_t errlen) {
    conf_addr_t a;
    memset(&a, 0, sizeof(a));
    if (strpbrk(v, " \t") != NULL) goto bad; /* INFO shows it as one word */
    if (v[0] == '\0' || v[0] == '/') {
        if (strlen(v) > CONF_PATH_MAX) {
            seterr(err, errlen, "metrics socket path is longer than %d bytes", CONF_PATH_MAX);
            return -1;
        }
        snprintf(c->metrics, sizeof(c->metrics), "%s", v);
        c->metrics_addr = a;
        return 0;
    }
    char host[CONF_STR_MAX];
    const char *colon = strrchr(v, ':');
    size_t hlen = colon ? (size_t)(colon - v) : 0;
    if (colon == NULL || hlen == 0 || hlen >= sizeof(host)) goto bad;
    memcpy(host, v, hlen);
    host[hlen] = '\0';
    if (host[0] == '[') {
        if (hlen < 3 || host[hlen - 1] != ']') goto bad;
        host[hlen - 1] = '\0';
        memmove(host, host + 1, hlen - 1);
    } else if (strchr(host, ':') != NULL) {
        goto bad;
    }
    uint32_t port;
    if (parse_u32(colon + 1, 1, 65535, &port, err, errlen) != 0) goto bad;
    snprintf(a.host, sizeof(a.host), "%s", host);
    a.port = (int)port;
    snprintf(c->metrics, sizeof(c->metrics), "%s", v);
    c->metrics_addr = a;
    return 0;
bad:
    seterr(err, errlen, "metrics '%s': expected host:port, [ipv6]:port, an absolute socket "
           "path, or nothing (off)", v);
    return -1;
}

/* "host:port host:port ...", an IPv6 host in brackets; :port defaults to
 * dport. Empty: none. what names one address in errors ("sentinel"). */
static int parse_addrs(conf_addr_t *out, size_t *count, size_t max, int dport,
                       const char *what, const char *v, char *err, size_t errlen) {
    size_t n = 0;
    const char *p = v;
    for (;;) {
        p += strspn(p, " \t,");
        if (*p == '\0') break;
        size_t len = strcspn(p, " \t,");
        char word[CONF_STR_MAX];
        if (len >= sizeof(word)) {
            seterr(err, errlen, "%s address '%.40s...' is too long", what, p);
            return -1;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        p += len;
        if (n == max) {
            seterr(err, errlen, "more than %zu %s addresses", max, what);
            return -1;
        }
        conf_addr_t *a = &out[n];
        char *host = word, *port = NULL;
        if (word[0] == '[') {
            char *close = strchr(word, ']');
            if (close == NULL || (close[1] != '\0' && close[1] != ':')) goto bad;
            *close = '\0';
            host = word + 1;
            if (close[1] == ':') port = close + 2;
        } else {
            char *colon = strrchr(word, ':');
            if (colon != NULL) {
                if (strchr(word, ':') != colon) goto bad; /* IPv6 wants brackets */
                *colon = '\0';
                port = colon + 1;
            }
        }
        if (host[0] == '\0') goto bad;
        a->port = dport;
        if (port != NULL) {
            uint32_t pn;
            if (parse_u32(port, 1, 65535, &pn, err, errlen) != 0) goto bad;
            a->port = (int)pn;
        }
        snprintf(a->host, sizeof(a->host), "%s", host);
        n++;
        continue;
    bad:
        seterr(err, errlen, "%s address '%s': expected host:port, [ipv6]:port or host", what,
               word);
        return -1;
    }
    *count = n;
    return 0;
}

/* url, sentinels and cluster each name the topology: at most one may be
 * set. key is being set to a non-empty value. */
static int one_topology(const conf_t *c, const char *key, char *err, size_t errlen) {
    const char *other = NULL;
    if (strcmp(key, "url") != 0 && c->url_set) other = "url";
    else if (strcmp(key, "sentinels") != 0 && c->sentinels_count > 0) other = "sentinels";
    else if (strcmp(key, "cluster") != 0 && c->cluster_count > 0) other = "cluster";
    else if (strcmp(key, "quorum") != 0 && c->quorum_count > 0) other = "quorum";
    if (other == NULL) return 0;
    seterr(err, errlen, "%s and %s exclude each other: Redis is either one server (url), "
           "a primary found by Sentinel (sentinels), a Redis Cluster (cluster) or a "
           "quorum of independent servers (quorum)", other, key);
    return -1;
}

/* ---- the keys' own parsers ---------------------------------------------- */

static int set_socket_group(conf_t *c, const conf_key_t *k, const char *v, char *err,
                            size_t errlen) {
    uint32_t gid;
    (void)k;
    c->socket_group_set = 0;
    if (v[0] == '\0') return 0;
    if (v[0] >= '0' && v[0] <= '9') {
        if (parse_u32(v, 0, CONF_NUM_MAX, &gid, err, errlen) != 0) return -1;
    } else {
        struct group *g = getgrnam(v);
        if (g == NULL) {
            seterr(err, errlen, "socket_group '%s': no such group", v);
            return -1;
        }
        gid = (uint32_t)g->gr_gid;
    }
    c->socket_gid = (gid_t)gid;
    c->socket_group_set = 1;
    return 0;
}

static int set_admin_uids(conf_t *c, const conf_key_t *k, const char *v, char *err,
                          size_t errlen) {
    (void)k;
    return parse_uids(c, v, err, errlen);
}

static int set_metrics(conf_t *c, const conf_key_t *k, const char *v, char *err,
                       size_t errlen) {
    (void)k;
    return parse_metrics(c, v, err, errlen);
}

static int set_url(conf_t *c, const conf_key_t *k, const char *v, char *err, size_t errlen) {
    if (one_topology(c, k->name, err, errlen) != 0) return -1;
    c->url_set = 1;
    return conf_parse_redis_url(c, v, err, errlen);
}

static int set_sentinels(conf_t *c, const conf_key_t *k, const char *v, char *err,
                         size_t errlen) {
    if (v[0] != '\0' && one_topology(c, k->name, err, errlen) != 0) return -1;
    return parse_addrs(c->sentinels, &c->sentinels_count, CONF_SENTINELS_MAX,
                       CONF_SENTINEL_PORT, "sentinel", v, err, errlen);
}

static int set_cluster(conf_t *c, const conf_key_t *k, const char *v, char *err,
                       size_t errlen) {
    if (v[0] != '\0' && one_topology(c, k->name, err, errlen) != 0) return -1;
    return parse_addrs(c->cluster, &c->cluster_count, CONF_CLUSTER_SEEDS_MAX,
                       CONF_REDIS_PORT, "cluster", v, err, errlen);
}

static int set_quorum(conf_t *c, const conf_key_t *k, const char *v, char *err,
                      size_t errlen) {
    if (strspn(v, " \t") != strlen(v) && one_topology(c, k->name, err, errlen) != 0) return -1;
    return parse_quorum(c, v, err, errlen);
}

static int set_rejoin_delay(conf_t *c, const conf_key_t *k, const char *v, char *err,
                            size_t errlen) {
    c->rejoin_delay_set = 1;
    return parse_u32(v, k->min, k->max, &c->rejoin_delay_ms, err, errlen);
}

static int set_clock_drift(conf_t *c, const conf_key_t *k, const char *v, char *err,
                           size_t errlen) {
    if (strcmp(v, "auto") == 0) {
        c->clock_drift_ms = CONF_DRIFT_AUTO;
        return 0;
    }
    return parse_u32(v, k->min, k->max, &c->clock_drift_ms, err, errlen);
}

static int set_replicas_ack(conf_t *c, const conf_key_t *k, const char *v, char *err,
                            size_t errlen) {
    uint32_t n;
    (void)k;
    if (strcmp(v, "auto") == 0) {
        c->replicas_ack = CONF_REPLICAS_AUTO;
        return 0;
    }
    if (parse_u32(v, 0, CONF_REPLICAS_MAX, &n, err, errlen) != 0) {
        seterr(err, errlen, "replicas_ack '%s' is not auto or a number from 0 to %d", v,
               CONF_REPLICAS_MAX);
        return -1;
    }
    c->replicas_ack = (int)n;
    return 0;
}

static int set_replicas_timeout(conf_t *c, const conf_key_t *k, const char *v, char *err,
                                size_t errlen) {
    c->replicas_timeout_set = 1;
    return parse_u32(v, k->min, k->max, &c->replicas_timeout_ms, err, errlen);
}

/* password and username: empty keeps what the url says. */
static int set_password(conf_t *c, const conf_key_t *k, const char *v, char *err,
                        size_t errlen) {
    if (v[0] == '\0') return 0;
    c->password_set = 1;
    return copy_str(c->password, sizeof(c->password), v, k->name, err, errlen);
}

static int set_username(conf_t *c, const conf_key_t *k, const char *v, char *err,
                        size_t errlen) {
    if (v[0] == '\0') return 0;
    c->username_set = 1;
    return copy_str(c->username, sizeof(c->username), v, k->name, err, errlen);
}

/* The key only; conf_finish() makes c->tls of it and the urls. */
static int set_tls(conf_t *c, const conf_key_t *k, const char *v, char *err, size_t errlen) {
    if (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0) {
        c->tls_key = v[0] == 'y';
        return 0;
    }
    seterr(err, errlen, "%s '%s' is not yes or no", k->name, v);
    return -1;
}

/* board_remote: yes or no. */
static int set_board_remote(conf_t *c, const conf_key_t *k, const char *v, char *err,
                            size_t errlen) {
    if (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0) {
        c->board_remote = v[0] == 'y';
        return 0;
    }
    seterr(err, errlen, "%s '%s' is not yes or no", k->name, v);
    return -1;
}

/* ---- the table ---------------------------------------------------------- */

static const char *const log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const sharded_names[] = {"auto", "yes", "no", NULL};

_Static_assert(sizeof(conf_log_level_t) == sizeof(int), "an ENUM key's field is an int");
_Static_assert(sizeof(conf_sharded_t) == sizeof(int), "an ENUM key's field is an int");

/* The field f of conf_t: where a key's value lives, and its size. */
#define AT(f) .offset = offsetof(conf_t, f), .size = sizeof(((conf_t *)0)->f)
#define U32(lo, hi) .type = CONF_TYPE_U32, .min = (lo), .max = (hi)

static const conf_key_t keys[] = {
    /* [server] */
    {"server", "socket", .type = CONF_TYPE_STR, .def = "/run/dlockd/dlockd.sock",
     .flags = CONF_KEY_NONEMPTY, AT(socket)},
    {"server", "socket_mode", .type = CONF_TYPE_MODE, .def = "0660", AT(socket_mode)},
    {"server", "socket_group", .type = CONF_TYPE_GROUP, .def = "", AT(socket_gid),
     .parse = set_socket_group},
    {"server", "max_clients", U32(1, 1000000), .def = "10000", .reload = CONF_LIVE,
     AT(max_clients)},
    {"server", "max_clients_per_uid", U32(1, 1000000), .def = "5000", .reload = CONF_LIVE,
     AT(max_clients_per_uid)},
    {"server", "max_locks_per_uid", U32(1, 100000000), .def = "100000", .reload = CONF_LIVE,
     AT(max_locks_per_uid)},
    {"server", "max_waiters_per_uid", U32(1, 10000000), .def = "50000", .reload = CONF_LIVE,
     AT(max_waiters_per_uid)},
    {"server", "max_line", U32(64, 1048576), .def = "4096", .reload = CONF_LIVE, AT(max_line)},
    {"server", "max_output", U32(4096, 1073741824), .def = "1048576", .reload = CONF_LIVE,
     AT(max_output)},
    {"server", "max_observes_per_client", U32(1, 1000000), .def = "1024", .reload = CONF_LIVE,
     AT(max_observes_per_client)},
    {"server", "max_inflight", U32(1, 1000000), .def = "1024", .reload = CONF_LIVE,
     AT(max_inflight)},
    {"server", "admin_uids", .type = CONF_TYPE_UIDS, .def = "0", .reload = CONF_LIVE,
     AT(admin_uids), .count = offsetof(conf_t, admin_uids_count), .parse = set_admin_uids},
    {"server", "log_level", .type = CONF_TYPE_ENUM, .def = "info", .reload = CONF_LIVE,
     AT(log_level), .names = log_level_names},
    {"server", "metrics", .type = CONF_TYPE_ENDPOINT, .def = "", AT(metrics),
     .parse = set_metrics},
    {"server", "board_remote", .type = CONF_TYPE_BOOL, .def = "no", AT(board_remote),
     .parse = set_board_remote},

    /* [redis] */
    {"redis", "url", .type = CONF_TYPE_URL, .def = "redis://127.0.0.1:6379/0", AT(url),
     .parse = set_url},
    {"redis", "password", .type = CONF_TYPE_STR, .def = "", AT(password),
     .parse = set_password},
    {"redis", "password_file", .type = CONF_TYPE_STR, .def = "", .flags = CONF_KEY_INDIRECT,
     AT(password_file)},
    {"redis", "username", .type = CONF_TYPE_STR, .def = "", AT(username),
     .parse = set_username},
    {"redis", "connect_timeout_ms", U32(1, 600000), .def = "1000",
     .reload = CONF_LIVE_BACKEND, AT(connect_timeout_ms)},
    {"redis", "command_timeout_ms", U32(1, 600000), .def = "2000",
     .reload = CONF_LIVE_BACKEND, AT(command_timeout_ms)},
    {"redis", "key_prefix", .type = CONF_TYPE_STR, .def = "dlock:",
     .flags = CONF_KEY_PRINTABLE, AT(key_prefix)},
    /* Unset, a rediss:// url turns TLS on; the daemon reads c->tls. */
    {"redis", "tls", .type = CONF_TYPE_BOOL, .def = NULL, AT(tls), .parse = set_tls},
    {"redis", "tls_ca_file", .type = CONF_TYPE_STR, .def = "", AT(tls_ca_file)},
    {"redis", "tls_cert_file", .type = CONF_TYPE_STR, .def = "", AT(tls_cert_file)},
    {"redis", "tls_key_file", .type = CONF_TYPE_STR, .def = "", AT(tls_key_file)},
    {"redis", "tls_server_name", .type = CONF_TYPE_STR, .def = "", AT(tls_server_name)},
    {"redis", "sentinels", .type = CONF_TYPE_ADDRS, .def = "", AT(sentinels),
     .count = offsetof(conf_t, sentinels_count), .parse = set_sentinels},
    {"redis", "master_name", .type = CONF_TYPE_STR, .def = "", .flags = CONF_KEY_PRINTABLE,
     AT(master_name)},
    {"redis", "sentinel_username", .type = CONF_TYPE_STR, .def = "", AT(sentinel_username)},
    {"redis", "sentinel_password", .type = CONF_TYPE_STR, .def = "", AT(sentinel_password)},
    {"redis", "cluster", .type = CONF_TYPE_ADDRS, .def = "", AT(cluster),
     .count = offsetof(conf_t, cluster_count), .parse = set_cluster},
    {"redis", "sharded_pubsub", .type = CONF_TYPE_ENUM, .def = "auto", AT(sharded_pubsub),
     .names = sharded_names},
    {"redis", "quorum", .type = CONF_TYPE_URLS, .def = "", AT(quorum),
     .count = offsetof(conf_t, quorum_count), .parse = set_quorum},
    /* Unset, conf_finish() makes it CONF_REJOIN_DEFAULT_MS or lease_ms. */
    {"redis", "rejoin_delay_ms", U32(10, 86400000), .def = NULL, AT(rejoin_delay_ms),
     .parse = set_rejoin_delay},
    {"redis", "clock_drift_ms", U32(0, 600000), .def = "auto", AT(clock_drift_ms),
     .parse = set_clock_drift},
    {"redis", "replicas_ack", .type = CONF_TYPE_INT, .def = "auto", AT(replicas_ack),
     .parse = set_replicas_ack},
    {"redis", "replicas_timeout_ms", U32(1, 600000), .def = "1000",
     .reload = CONF_LIVE_BACKEND, AT(replicas_timeout_ms), .parse = set_replicas_timeout},

    /* [lock] */
    {"lock", "lease_ms", U32(10, 86400000), .def = "30000", .reload = CONF_LIVE_LOCKS,
     AT(lease_ms)},
    {"lock", "renew_every_ms", U32(0, 86400000), .def = "0", .reload = CONF_LIVE_LOCKS,
     AT(renew_every_ms)},
    {"lock", "max_locks_per_client", U32(1, 1000000), .def = "1000", .reload = CONF_LIVE,
     AT(max_locks_per_client)},
    {"lock", "max_waiters", U32(1, 10000000), .def = "100000", .reload = CONF_LIVE,
     AT(max_waiters)},
};

#undef AT
#undef U32

_Static_assert(sizeof(keys) / sizeof(keys[0]) <= CONF_KEYS_MAX, "raise CONF_KEYS_MAX");

const conf_key_t *conf_keys(size_t *n) {
    *n = sizeof(keys) / sizeof(keys[0]);
    return keys;
}

const conf_key_t *conf_key_find(const char *section, const char *name) {
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(keys[i].name, name) == 0 && strcmp(keys[i].section, section) == 0)
            return &keys[i];
    return NULL;
}

static int known_section(const char *section) {
    if (strcmp(section, "access") == 0) return 1;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(keys[i].section, section) == 0) return 1;
    return 0;
}

#define FIELD(c, k) ((char *)(c) + (k)->offset)
#define CFIELD(c, k) ((const char *)(c) + (k)->offset)
#define COUNT(c, k) (*(const size_t *)((const char *)(c) + (k)->count))

/* The parsers of the types that need no key's own. */
static int set_by_type(conf_t *c, const conf_key_t *k, const char *v, char *err,
                       size_t errlen) {
    switch (k->type) {
    case CONF_TYPE_U32:
        return parse_u32(v, k->min, k->max, (uint32_t *)(void *)FIELD(c, k), err, errlen);
    case CONF_TYPE_MODE:
        return parse_mode(v, (unsigned *)(void *)FIELD(c, k), err, errlen);
    case CONF_TYPE_ENUM: {
        char words[128] = "";
        for (int i = 0; k->names[i] != NULL; i++) {
            if (strcmp(v, k->names[i]) == 0) {
                memcpy(FIELD(c, k), &i, sizeof(i));
                return 0;
            }
            size_t len = strlen(words);
            snprintf(words + len, sizeof(words) - len, "%s%s", i ? ", " : "", k->names[i]);
        }
        seterr(err, errlen, "%s '%s' is not one of %s", k->name, v, words);
        return -1;
    }
    case CONF_TYPE_STR:
        if ((k->flags & CONF_KEY_NONEMPTY) && v[0] == '\0') {
            seterr(err, errlen, "%s must not be empty", k->name);
            return -1;
        }
        if (k->flags & CONF_KEY_PRINTABLE) {
            for (const char *p = v; *p; p++) {
                if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
                    seterr(err, errlen, "%s may hold only bytes 0x21-0x7E", k->name);
                    return -1;
                }
            }
        }
        return copy_str(FIELD(c, k), k->size, v, k->name, err, errlen);
    default:
        seterr(err, errlen, "%s has no parser", k->name); /* a row without one: a bug */
        return -1;
    }
}

static int set_key(conf_t *c, const conf_key_t *k, const char *v, char *err, size_t errlen) {
    return k->parse != NULL ? k->parse(c, k, v, err, errlen) : set_by_type(c, k, v, err, errlen);
}

/* One [access] rule, from the file's line (0: not from a file). */
static int set_access(conf_t *c, const char *key, const char *value, int line, char *err,
                      size_t errlen) {
    if (c->access == NULL && (c->access = access_rules_new()) == NULL) {
        seterr(err, errlen, "out of memory");
        return -1;
    }
    return access_rules_add(c->access, key, value, line, err, errlen);
}

int conf_set(conf_t *c, const char *section, const char *key,
             const char *value, char *err, size_t errlen) {
    if (strcmp(section, "access") == 0) return set_access(c, key, value, 0, err, errlen);
    const conf_key_t *k = conf_key_find(section, key);
    if (k != NULL) return set_key(c, k, value, err, errlen);
    if (section[0] == '\0')
        seterr(err, errlen, "key '%s' outside of any section", key);
    else if (known_section(section))
        seterr(err, errlen, "unknown key '%s' in [%s]", key, section);
    else
        seterr(err, errlen, "unknown section [%s]", section);
    return -1;
}

void conf_free(conf_t *c) {
    access_rules_free(c->access);
    c->access = NULL;
}

void conf_defaults(conf_t *c) {
    char err[CONF_ERR_LEN];

    memset(c, 0, sizeof(*c));
    /* Each default parses (test_conf checks that every one does). */
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i].def != NULL) (void)set_key(c, &keys[i], keys[i].def, err, sizeof(err));
    /* No key has been given yet. */
    c->password_set = 0;
    c->username_set = 0;
    c->url_set = 0;
    c->replicas_timeout_set = 0;
    c->rejoin_delay_set = 0;
    c->tls_key = -1;
}

int conf_key_same(const conf_t *a, const conf_t *b, const conf_key_t *k) {
    const char *fa = CFIELD(a, k), *fb = CFIELD(b, k);
    switch (k->type) {
    case CONF_TYPE_STR:
    case CONF_TYPE_URL:
    case CONF_TYPE_ENDPOINT:
        return strcmp(fa, fb) == 0;
    case CONF_TYPE_GROUP: /* the gid counts only where one is set */
        return a->socket_group_set == b->socket_group_set &&
               (!a->socket_group_set || a->socket_gid == b->socket_gid);
    case CONF_TYPE_UIDS:
        return COUNT(a, k) == COUNT(b, k) &&
               memcmp(fa, fb, COUNT(a, k) * sizeof(uid_t)) == 0;
    case CONF_TYPE_ADDRS: {
        const conf_addr_t *x = (const conf_addr_t *)(const void *)fa;
        const conf_addr_t *y = (const conf_addr_t *)(const void *)fb;
        if (COUNT(a, k) != COUNT(b, k)) return 0;
        for (size_t i = 0; i < COUNT(a, k); i++)
            if (x[i].port != y[i].port || strcmp(x[i].host, y[i].host) != 0) return 0;
        return 1;
    }
    case CONF_TYPE_URLS: /* parse_quorum() zeroes them first: whole bytes compare */
        return COUNT(a, k) == COUNT(b, k) &&
               memcmp(fa, fb, COUNT(a, k) * sizeof(conf_url_t)) == 0;
    default: /* numbers, words and flags */
        return memcmp(fa, fb, k->size) == 0;
    }
}

void conf_key_copy(conf_t *dst, const conf_t *src, const conf_key_t *k) {
    memcpy(FIELD(dst, k), CFIELD(src, k), k->size);
    if (k->count != 0) memcpy((char *)dst + k->count, (const char *)src + k->count, sizeof(size_t));
    if (k->type == CONF_TYPE_GROUP) dst->socket_group_set = src->socket_group_set;
}

uint32_t conf_key_u32(const conf_t *c, const conf_key_t *k) {
    uint32_t v;
    memcpy(&v, CFIELD(c, k), sizeof(v));
    return v;
}

void conf_diff(const conf_t *a, const conf_t *b, conf_diff_t *d) {
    memset(d, 0, sizeof(*d));
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const conf_key_t *k = &keys[i];
        if ((k->flags & CONF_KEY_INDIRECT) || conf_key_same(a, b, k)) continue;
        if (k->reload == CONF_RESTART) {
            d->restart[d->restart_count++] = k;
        } else {
            d->live[d->live_count++] = k;
            d->live_kinds |= 1u << k->reload;
        }
    }
}

#undef FIELD
#undef CFIELD
#undef COUNT

/* Reads the first line of the password file. */
static int read_password_file(conf_t *c, char *err, size_t errlen) {
    struct stat st;
    FILE *f = fopen(c->password_file, "r");
    if (f == NULL) {
        seterr(err, errlen, "password_file %s: %s", c->password_file, strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        seterr(err, errlen, "password_file %s: not a regular file", c->password_file);
        fclose(f);
        return -1;
    }
    if (conf_file_unsafe(&st, err, errlen, c->password_file) != 0) {
        fclose(f);
        return -1;
    }
    char line[CONF_STR_MAX + 2];
    if (fgets(line, sizeof(line), f) == NULL) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '\0' || strlen(line) >= CONF_STR_MAX) {
        seterr(err, errlen, "password_file %s: the first line must hold the password "
               "(1 to %d bytes)", c->password_file, CONF_STR_MAX - 1);
        return -1;
    }
    memcpy(c->password, line, strlen(line) + 1);
    c->password_set = 1;
    return 0;
}

int conf_finish(conf_t *c, char *err, size_t errlen) {
    if (conf_check_sentinels(c, err, errlen) != 0) return -1;
    const char *senv = getenv(CONF_SENTINEL_PASSWORD_ENV);
    if (senv != NULL && senv[0] != '\0') {
        if (strlen(senv) >= CONF_STR_MAX) {
            seterr(err, errlen, "%s is longer than %d bytes", CONF_SENTINEL_PASSWORD_ENV,
                   CONF_STR_MAX - 1);
            return -1;
        }
        memcpy(c->sentinel_password, senv, strlen(senv) + 1);
    }
    /* Unset, it adapts to a short command_timeout_ms. */
    if (!c->replicas_timeout_set && c->replicas_timeout_ms >= c->command_timeout_ms)
        c->replicas_timeout_ms = c->command_timeout_ms / 2 ? c->command_timeout_ms / 2 : 1;
    /* The password: environment, else password_file, else the key or url. */
    const char *env = getenv(CONF_PASSWORD_ENV);
    if (env != NULL && env[0] != '\0') {
        if (strlen(env) >= CONF_STR_MAX) {
            seterr(err, errlen, "%s is longer than %d bytes", CONF_PASSWORD_ENV,
                   CONF_STR_MAX - 1);
            return -1;
        }
        memcpy(c->password, env, strlen(env) + 1);
        c->password_set = 1;
    } else if (c->password_file[0] != '\0' && read_password_file(c, err, errlen) != 0) {
        return -1;
    }
    /* TLS: the tls key, or a rediss:// url. */
    if (c->url_tls && c->tls_key == 0) {
        seterr(err, errlen, "a rediss:// url needs TLS, but tls = no");
        return -1;
    }
    c->tls = c->url_tls || c->tls_key == 1;
    for (size_t i = 0; i < c->quorum_count; i++) {
        if (!c->quorum[i].tls) continue;
        if (c->tls_key == 0) {
            seterr(err, errlen, "quorum node %zu is rediss://, which needs TLS, but tls = no",
                   i + 1);
            return -1;
        }
        c->tls = 1;
    }
    if (c->tls && c->redis_kind == CONF_REDIS_UNIX && c->sentinels_count == 0 &&
        c->cluster_count == 0 && c->quorum_count == 0) {
        seterr(err, errlen, "tls applies to TCP connections, not to a unix:// url");
        return -1;
    }
    if ((c->tls_cert_file[0] != '\0') != (c->tls_key_file[0] != '\0')) {
        seterr(err, errlen, "tls_cert_file and tls_key_file go together");
        return -1;
    }
    if (c->quorum_count > 0 && !c->rejoin_delay_set)
        c->rejoin_delay_ms = c->lease_ms > CONF_REJOIN_DEFAULT_MS ? c->lease_ms
                                                               : CONF_REJOIN_DEFAULT_MS;
    /* The rules: the default without [access] keys, and admin_uids. */
    if ((c->access == NULL && (c->access = access_rules_new()) == NULL) ||
        access_rules_finish(c->access, c->admin_uids, c->admin_uids_count) != 0) {
        seterr(err, errlen, "out of memory");
        return -1;
    }
    if (c->renew_every_ms == 0) c->renew_every_ms = c->lease_ms / 3;
    if (c->renew_every_ms == 0) c->renew_every_ms = 1;
    return conf_check_live(c, err, errlen);
}

int conf_check_live(const conf_t *c, char *err, size_t errlen) {
    if (c->replicas_ack != 0 && c->replicas_timeout_ms >= c->command_timeout_ms) {
        seterr(err, errlen, "replicas_timeout_ms (%u) must be below command_timeout_ms (%u): "
               "WAIT holds the connection that long", c->replicas_timeout_ms,
               c->command_timeout_ms);
        return -1;
    }
    if (c->quorum_count > 0) {
        uint32_t drift = conf_clock_drift(c, c->lease_ms);
        if (drift >= c->lease_ms / 2) {
            seterr(err, errlen, "clock_drift_ms (%u) must be below half of lease_ms (%u): a "
                   "quorum's lock holds for the lease less the drift", drift, c->lease_ms);
            return -1;
        }
        if (c->lease_ms > c->rejoin_delay_ms) {
            seterr(err, errlen, "lease_ms (%u) must not exceed rejoin_delay_ms (%u): a "
                   "restarted quorum node must sit out longer than any lease",
                   c->lease_ms, c->rejoin_delay_ms);
            return -1;
        }
    }
    if (c->renew_every_ms >= c->lease_ms) {
        seterr(err, errlen, "renew_every_ms (%u) must be below lease_ms (%u)",
               c->renew_every_ms, c->lease_ms);
        return -1;
    }
    return 0;
}

void conf_in_force(conf_t *out, const conf_t *running, const conf_t *next) {
    *out = *next;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i].reload == CONF_RESTART && !(keys[i].flags & CONF_KEY_INDIRECT))
            conf_key_copy(out, running, &keys[i]);
}

int conf_check_sentinels(const conf_t *c, char *err, size_t errlen) {
    if (c->sentinels_count > 0 && c->master_name[0] == '\0') {
        seterr(err, errlen, "sentinels needs master_name, the name the Sentinels monitor "
               "the primary under");
        return -1;
    }
    if (c->sentinels_count == 0 && c->master_name[0] != '\0') {
        seterr(err, errlen, "master_name needs sentinels");
        return -1;
    }
    return 0;
}

/* State shared by the line-counting reader and the handler. */
typedef struct load_s {
    conf_t *conf;
    FILE *file;
    int line;         /* the line inih is processing */
    int err_line;     /* line of the first error we found, or 0 */
    char err[CONF_ERR_LEN];
    char *buf;        /* getline's buffer */
    char section[64]; /* the current [section], for long lines */
    int sentinels_line; /* where sentinels or master_name was set, for checks at the end */
    size_t bufcap;
} load_t;

static int on_key(void *user, const char *section, const char *name,
                  const char *value);

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    return s;
}

/* A line too long for inih: a comment is skipped, a key = value line is
 * handled here the way inih would (inline " ;" comments included). */
static void long_line(load_t *ld, char *line) {
    char *t = trim(line);
    if (*t == ';' || *t == '#' || *t == '\0') return;
    char *eq = strpbrk(t, "=:");
    if (*t == '[' || eq == NULL) {
        ld->err_line = ld->line;
        snprintf(ld->err, sizeof(ld->err), "syntax error (expected key = value)");
        return;
    }
    *eq = '\0';
    char *value = eq + 1;
    for (char *p = value; *p; p++) {
        if (*p == ';' && p > value && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            break;
        }
    }
    on_key(ld, ld->section, trim(t), trim(value));
}

/* inih reads through a fixed buffer (INI_MAX_LINE, 200 bytes in Debian's
 * build) and would silently split a longer line in two. Lines are read
 * whole here; long ones are handled by long_line() and reach inih blank. */
static char *on_read_line(char *str, int num, void *stream) {
    load_t *ld = stream;
    if (ld->err_line != 0) return NULL; /* stop at the first error */
    ssize_t n = getline(&ld->buf, &ld->bufcap, ld->file);
    if (n < 0) return NULL;
    ld->line++;
    size_t len = (size_t)n;
    while (len > 0 && (ld->buf[len - 1] == '\n' || ld->buf[len - 1] == '\r')) len--;
    if (memchr(ld->buf, '\0', len) != NULL) {
        ld->err_line = ld->line;
        snprintf(ld->err, sizeof(ld->err), "NUL byte in the line");
        return NULL;
    }
    ld->buf[len] = '\0';
    const char *t = ld->buf + strspn(ld->buf, " \t");
    /* inih would take an indented line as the continuation of the value
     * above and silently replace it: not in this file format. */
    if (t != ld->buf && *t != '\0' && *t != ';' && *t != '#') {
        ld->err_line = ld->line;
        snprintf(ld->err, sizeof(ld->err),
                 "indented line (continuation lines are not allowed; start keys at column 1)");
        return NULL;
    }
    if (*t == '[') { /* keep track of the section for long lines */
        size_t sl = strcspn(t + 1, "]");
        if (sl >= sizeof(ld->section)) sl = sizeof(ld->section) - 1;
        memcpy(ld->section, t + 1, sl);
        ld->section[sl] = '\0';
    }
    if (len + 2 > (size_t)num) {
        long_line(ld, ld->buf);
        len = 0;
    }
    memcpy(str, ld->buf, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

static int on_key(void *user, const char *section, const char *name,
                  const char *value) {
    load_t *ld = user;
    char err[CONF_ERR_LEN];
    if (strcmp(section, "redis") == 0 &&
        (strcmp(name, "sentinels") == 0 || strcmp(name, "master_name") == 0))
        ld->sentinels_line = ld->line;
    int rc = strcmp(section, "access") == 0
                 ? set_access(ld->conf, name, value, ld->line, err, sizeof(err))
                 : conf_set(ld->conf, section, name, value, err, sizeof(err));
    if (rc == 0) return 1;
    if (ld->err_line == 0) {
        ld->err_line = ld->line;
        snprintf(ld->err, sizeof(ld->err), "%s", err);
    }
    return 0;
}

int conf_load_stream(conf_t *c, FILE *f, const char *name, char *err,
                     size_t errlen) {
    load_t ld = {.conf = c, .file = f};

    int rc = ini_parse_stream(on_read_line, &ld, on_key, &ld);
    int read_error = ferror(ld.file);
    free(ld.buf);
    if (rc > 0 && (ld.err_line == 0 || rc < ld.err_line)) {
        seterr(err, errlen, "%s:%d: syntax error (expected [section], key = value or a ; comment)",
               name, rc);
        return -1;
    }
    if (ld.err_line != 0) {
        seterr(err, errlen, "%s:%d: %s", name, ld.err_line, ld.err);
        return -1;
    }
    if (rc < 0 || read_error) {
        seterr(err, errlen, "%s: cannot read the file", name);
        return -1;
    }
    char why[CONF_ERR_LEN];
    if (conf_check_sentinels(c, why, sizeof(why)) != 0) {
        seterr(err, errlen, "%s:%d: %s", name, ld.sentinels_line, why);
        return -1;
    }
    return 0;
}

int conf_file_unsafe(const struct stat *st, char *err, size_t errlen, const char *path) {
    if (geteuid() != 0) return 0;
    /* Writable by root's own group is still only root's business. */
    if (st->st_uid != 0 || (st->st_mode & S_IWOTH) != 0 ||
        ((st->st_mode & S_IWGRP) != 0 && st->st_gid != 0)) {
        seterr(err, errlen, "%s: running as root, refusing a file that others can write "
               "(owner uid %u, mode %04o): make it root's and not group/world-writable",
               path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

int conf_load(conf_t *c, const char *path, char *err, size_t errlen) {
    struct stat st;

    FILE *f = fopen(path, "r");
    if (f == NULL) {
        seterr(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        seterr(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return -1;
    }
    if (conf_file_unsafe(&st, err, errlen, path) != 0) {
        fclose(f);
        return -1;
    }
    int rc = conf_load_stream(c, f, path, err, errlen);
    fclose(f);
    return rc;
}

int conf_is_admin(const conf_t *c, uid_t uid) {
    for (size_t i = 0; i < c->admin_uids_count; i++)
        if (c->admin_uids[i] == uid) return 1;
    return 0;
}

const char *conf_log_level_name(conf_log_level_t level) {
    if ((unsigned)level < sizeof(log_level_names) / sizeof(log_level_names[0]) - 1)
        return log_level_names[level];
    return "?";
}
