/* Access at run time: connections per uid, the rate-limited deny log, a peer's groups.
 * SPDX-License-Identifier: MIT */
#include "access.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct user_s {
    hmap_node_t node;
    uid_t uid;                 /* the key's bytes */
    uint32_t count;
} user_t;

typedef struct said_s {
    hmap_node_t node;
    struct {
        uid_t uid;
        int rule;
    } key;                     /* the key's bytes */
    uint64_t last_ms;          /* when a line was last logged */
    uint64_t suppressed;       /* denials since, not logged */
} said_t;

int access_users_init(access_users_t *u) {
    return hmap_init(&u->map);
}

static void free_all(hmap_t *m) {
    size_t i = 0;
    hmap_node_t *n = hmap_next(m, &i, NULL);
    while (n != NULL) {
        hmap_node_t *next = hmap_next(m, &i, n);
        hmap_del(m, n);
        free(n);
        n = next;
    }
    hmap_free(m);
}

void access_users_free(access_users_t *u) {
    free_all(&u->map);
}

static user_t *user_find(const access_users_t *u, uid_t uid) {
    return (user_t *)hmap_get(&u->map, (const char *)&uid, sizeof(uid));
}

int access_users_join(access_users_t *u, uid_t uid, uint32_t limit) {
    user_t *e = user_find(u, uid);
    if (e != NULL && e->count >= limit) return 1;
    if (e == NULL) {
        if (limit == 0) return 1;
        if ((e = calloc(1, sizeof(*e))) == NULL) return -1;
        e->uid = uid;
        e->node.key = (const char *)&e->uid;
        e->node.len = sizeof(e->uid);
        hmap_put(&u->map, &e->node);
    }
    e->count++;
    return 0;
}

void access_users_leave(access_users_t *u, uid_t uid) {
    user_t *e = user_find(u, uid);
    if (e == NULL) return;
    if (--e->count == 0) {
        hmap_del(&u->map, &e->node);
        free(e);
    }
}

uint32_t access_users_count(const access_users_t *u, uid_t uid) {
    const user_t *e = user_find(u, uid);
    return e ? e->count : 0;
}

int access_log_init(access_log_t *l) {
    return hmap_init(&l->map);
}

void access_log_free(access_log_t *l) {
    free_all(&l->map);
}

/* Forgets the pairs whose last line is a period old and that have nothing
 * to sum up; their next denial is logged at once anyway. */
static void log_prune(access_log_t *l, uint64_t now_ms) {
    size_t i = 0;
    hmap_node_t *n = hmap_next(&l->map, &i, NULL);
    while (n != NULL) {
        hmap_node_t *next = hmap_next(&l->map, &i, n);
        said_t *s = (said_t *)n;
        if (now_ms - s->last_ms >= ACCESS_LOG_EVERY_MS) {
            hmap_del(&l->map, n);
            free(s);
        }
        n = next;
    }
}

int access_log_deny(access_log_t *l, uid_t uid, int rule, uint64_t now_ms,
                    uint64_t *suppressed) {
    said_t probe;
    memset(&probe.key, 0, sizeof(probe.key));
    probe.key.uid = uid;
    probe.key.rule = rule;
    said_t *s = (said_t *)hmap_get(&l->map, (const char *)&probe.key, sizeof(probe.key));
    *suppressed = 0;
    if (s != NULL) {
        if (now_ms - s->last_ms < ACCESS_LOG_EVERY_MS) {
            s->suppressed++;
            return 0;
        }
        *suppressed = s->suppressed;
        s->suppressed = 0;
        s->last_ms = now_ms;
        return 1;
    }
    if (l->map.count >= ACCESS_LOG_KEYS_MAX) log_prune(l, now_ms);
    if (l->map.count >= ACCESS_LOG_KEYS_MAX) return 1; /* all recent: log, untracked */
    if ((s = calloc(1, sizeof(*s))) == NULL) return 1;
    s->key = probe.key;
    s->node.key = (const char *)&s->key;
    s->node.len = sizeof(s->key);
    s->last_ms = now_ms;
    hmap_put(&l->map, &s->node);
    return 1;
}

int access_peer_read(access_peer_t *p, pid_t pid, uid_t uid, gid_t gid) {
    char path[64], text[ACCESS_STATUS_MAX + 1];
    p->uid = uid;
    p->gids[0] = gid;
    p->ngids = 1;
    if (pid <= 0) return -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = 0;
    ssize_t n;
    while (len < ACCESS_STATUS_MAX &&
           (n = read(fd, text + len, ACCESS_STATUS_MAX - len)) > 0)
        len += (size_t)n;
    close(fd);
    text[len] = '\0';
    int added = access_parse_groups(text, uid, p->gids, p->ngids, ACCESS_GROUPS_MAX);
    if (added < 0) return -1;
    p->ngids += (size_t)added;
    return added;
}
