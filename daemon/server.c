/* The listening Unix socket: stale-file check, permissions without a window,
 * admission (max_clients, max_clients_per_uid, peer credentials).
 * SPDX-License-Identifier: MIT */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "access.h"
#include "log.h"
#include "proto/proto.h"

struct server_s {
    uv_pipe_t pipe;       /* the listener */
    uv_loop_t *loop;
    const conf_t *conf;
    sessions_t *ss;
    log_once_t accept_log;  /* accept errors: said once, then summed up */
    log_once_t full_log;  /* refused at max_clients: likewise */
    access_log_t limit_log; /* refused at max_clients_per_uid: a line per uid a minute */
    access_users_t users; /* connections per uid, admitted and not yet gone */
    int closed;           /* the listener's close callback ran ... */
    int freed;            /* ... and server_free was called: both, and it goes */
    char path[CONF_PATH_MAX + 1];
};

/* The directory the socket goes in, checked before anything else: bind()
 * would say ENOENT for a missing one, and libuv turns that into "permission
 * denied". 0 if it is there and ours to write, -1 with what is wrong. */
static int check_dir(const char *path, char *err, size_t errlen) {
    char dir[CONF_PATH_MAX + 1];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (slash == NULL) snprintf(dir, sizeof(dir), ".");
    else if (slash == path) snprintf(dir, sizeof(dir), "/");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e == ENOENT)
            snprintf(err, errlen, "socket directory %s does not exist", dir);
        else if (e == ENOTDIR)
            snprintf(err, errlen, "socket directory %s does not exist: a part of its path "
                     "is not a directory", dir);
        else if (e == EACCES)
            snprintf(err, errlen, "socket directory %s cannot be reached by uid %u: a directory "
                     "above it is not searchable", dir, (unsigned)geteuid());
        else
            snprintf(err, errlen, "socket directory %s: %s", dir, strerror(e));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "socket directory %s is not a directory", dir);
        return -1;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        int e = errno;
        if (e == EACCES)
            snprintf(err, errlen, "socket directory %s is not writable by uid %u", dir,
                     (unsigned)geteuid());
        else if (e == EROFS)
            snprintf(err, errlen, "socket directory %s is on a read-only file system", dir);
        else
            snprintf(err, errlen, "socket directory %s: %s", dir, strerror(e));
        return -1;
    }
    return 0;
}

/* Returns 0 if path is free to bind (removing a stale socket), -1 if not. */
static int claim_path(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket; refusing to remove it", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    if (rc == 0) {
        snprintf(err, errlen, "%s: another dlockd is already listening there", path);
        return -1;
    }
    if (e != ECONNREFUSED) {
        snprintf(err, errlen, "%s: cannot tell whether it is in use: %s", path, strerror(e));
        return -1;
    }
    if (unlink(path) != 0) {
        snprintf(err, errlen, "%s: cannot remove stale socket: %s", path, strerror(errno));
        return -1;
    }
    log_info("removed stale socket %s", path);
    return 0;
}

static void server_release(server_t *srv) {
    access_users_free(&srv->users);
    access_log_free(&srv->limit_log);
    free(srv);
}

static void on_listener_close(uv_handle_t *handle) {
    server_t *srv = handle->data;
    srv->closed = 1;
    if (srv->freed) server_release(srv);
}

static void on_refused_close(uv_handle_t *handle) {
    free(handle);
}

/* Writes "ERR LIMIT <why>" to a connection refused and closes it. */
static void refuse(uv_pipe_t *client, const char *why) {
    char line[PROTO_REPLY_MAX];
    int n = proto_reply_error(line, PROTO_ERROR_MAX, PROTO_ERR_LIMIT, why);
    uv_buf_t b = uv_buf_init(line, (unsigned)n);
    uv_try_write((uv_stream_t *)client, &b, 1);
    uv_close((uv_handle_t *)client, on_refused_close);
}

/* SO_PEERCRED: who is at the other end (uid -1 when it cannot be told). */
static void peer_credentials(uv_pipe_t *client, session_peer_t *p) {
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    p->pid = 0;
    p->uid = (uid_t)-1;
    p->gid = (gid_t)-1;
    if (uv_fileno((uv_handle_t *)client, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        p->pid = cred.pid;
        p->uid = cred.uid;
        p->gid = cred.gid;
    }
}

/* The groups the access rules judge: read from /proc at the connect. */
static void peer_groups(session_peer_t *p) {
    p->access.uid = p->uid;
    p->access.gids[0] = p->gid;
    p->access.ngids = 1;
    access_peer_read(&p->access, p->pid, p->uid, p->gid);
}

/* A connection admitted ends: one less of its uid. */
static void on_leave(void *data, uid_t uid) {
    server_t *srv = data;
    access_users_leave(&srv->users, uid);
}

/* max_clients_per_uid: 0 if the peer is counted in, else it is refused. */
static int refuse_per_uid(server_t *srv, uv_pipe_t *client, const session_peer_t *p) {
    int rc = access_users_join(&srv->users, p->uid, srv->conf->max_clients_per_uid);
    if (rc == 0) return 0;
    const char *why = rc > 0 ? "max_clients_per_uid reached" : "out of memory";
    refuse(client, why);
    sessions_count_refused(srv->ss, 1);
    uint64_t more;
    if (access_log_deny(&srv->limit_log, p->uid, ACCESS_LOG_KEY_LIMIT, uv_now(srv->loop),
                        &more)) {
        char extra[96] = "";
        if (more > 0)
            snprintf(extra, sizeof(extra), " (and %llu more of uid %u in the last %d s)",
                     (unsigned long long)more, (unsigned)p->uid, ACCESS_LOG_EVERY_MS / 1000);
        log_warn("client (pid %d uid %u) refused: %s (%u)%s", (int)p->pid, (unsigned)p->uid, why,
                 srv->conf->max_clients_per_uid, extra);
    }
    return 1;
}

/* Accepts one connection: refused with ERR LIMIT at max_clients (or while
 * every session closes, at shutdown) and max_clients_per_uid, else handed
 * to the sessions with its credentials. Groups are read from /proc at
 * connect, rules or not: a reload may bring gid rules, and the groups to
 * judge are those of the connect. */
static void admit(server_t *srv, uv_stream_t *listener) {
    uv_pipe_t *client = malloc(sizeof(*client));
    if (client == NULL) return; /* it waits in the backlog */
    uv_pipe_init(srv->loop, client, 0);
    if (uv_accept(listener, (uv_stream_t *)client) != 0) {
        uv_close((uv_handle_t *)client, on_refused_close);
        return;
    }
    if (sessions_full(srv->ss)) {
        refuse(client, "max_clients reached");
        sessions_count_refused(srv->ss, 0);
        if (srv->freed || srv->closed)
            log_debug("shutting down: connection refused");
        else /* once, then a summary a period while it goes on */
            log_once(&srv->full_log, CONF_LOG_WARN,
                     "max_clients (%u) reached: connections are refused", srv->conf->max_clients);
        return;
    }
    session_peer_t p = {.leave = on_leave, .leave_data = srv};
    peer_credentials(client, &p);
    if (refuse_per_uid(srv, client, &p)) return;
    peer_groups(&p);
    /* Refusals at max_clients have no end of their own: one period
     * without any, and a connection taken, is the end. */
    if (log_once_quiet(&srv->full_log)) {
        uint64_t span = srv->full_log.last_ms - srv->full_log.first_ms, refused;
        log_once_end(&srv->full_log, &refused, NULL);
        log_info("max_clients (%u): accepting connections again; %llu refused in %llu.%llu s",
                 srv->conf->max_clients, (unsigned long long)refused,
                 (unsigned long long)(span / 1000), (unsigned long long)(span % 1000 / 100));
    }
    sessions_adopt(srv->ss, client, &p);
}

static void on_connection(uv_stream_t *listener, int status) {
    server_t *srv = listener->data;
    if (status < 0) {
        /* Out of descriptors, libuv itself accepts and closes the waiting
         * connections (its reserve-descriptor trick), so the loop does
         * not spin. What errors still reach us are said once, then summed
         * up every LOG_SUMMARY_MS while they go on. */
        log_once(&srv->accept_log, CONF_LOG_WARN, "accept: %s%s", uv_strerror(status),
                 status == UV_EMFILE || status == UV_ENFILE
                     ? " (out of file descriptors: connections are being refused)"
                     : "");
        return;
    }
    /* They have no end of their own: a period without any is the end. */
    if (log_once_quiet(&srv->accept_log)) {
        uint64_t span = srv->accept_log.last_ms - srv->accept_log.first_ms, errors;
        log_once_end(&srv->accept_log, &errors, NULL);
        log_info("accept: working again; %llu error%s in %llu.%llu s", (unsigned long long)errors,
                 errors == 1 ? "" : "s", (unsigned long long)(span / 1000),
                 (unsigned long long)(span % 1000 / 100));
    }
    admit(srv, listener);
}

server_t *server_listen(uv_loop_t *loop, const conf_t *conf, sessions_t *ss,
                        char *err, size_t errlen) {
    server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    srv->ss = ss;
    srv->loop = loop;
    srv->conf = conf;
    snprintf(srv->path, sizeof(srv->path), "%s", conf->socket);
    if (access_users_init(&srv->users) != 0 || access_log_init(&srv->limit_log) != 0) {
        snprintf(err, errlen, "out of memory");
        server_release(srv);
        return NULL;
    }
    if (check_dir(srv->path, err, errlen) != 0 || claim_path(srv->path, err, errlen) != 0) {
        server_release(srv);
        return NULL;
    }
    uv_pipe_init(loop, &srv->pipe, 0);
    srv->pipe.data = srv;

    /* bind() creates the file with 0777 & ~umask: set the umask so that the
     * file is born with socket_mode and is never wider, even for a moment. */
    mode_t old = umask((mode_t)(~conf->socket_mode & 0777));
    int rc = uv_pipe_bind(&srv->pipe, srv->path);
    umask(old);
    /* The group goes first, then the exact mode: the bits are never wider
     * than socket_mode at any moment. */
    if (rc == 0 && conf->socket_group_set && chown(srv->path, (uid_t)-1, conf->socket_gid) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc == 0 && chmod(srv->path, (mode_t)conf->socket_mode) != 0) rc = uv_translate_sys_error(errno);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->pipe, SERVER_BACKLOG, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", srv->path, uv_strerror(rc));
        srv->freed = 1;
        uv_close((uv_handle_t *)&srv->pipe, on_listener_close);
        return NULL;
    }
    log_info("listening on %s (mode %04o)", srv->path, conf->socket_mode);
    return srv;
}

server_t *server_adopt(uv_loop_t *loop, const conf_t *conf, sessions_t *ss, int fd,
                       const char *path, char *err, size_t errlen) {
    server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    srv->ss = ss;
    srv->loop = loop;
    srv->conf = conf;
    snprintf(srv->path, sizeof(srv->path), "%s", path);
    if (access_users_init(&srv->users) != 0 || access_log_init(&srv->limit_log) != 0) {
        snprintf(err, errlen, "out of memory");
        server_release(srv);
        return NULL;
    }
    if (strcmp(path, conf->socket) != 0)
        log_warn("upgrade: the socket stays %s (socket %s changes only with a restart)", path,
                 conf->socket);
    uv_pipe_init(loop, &srv->pipe, 0);
    srv->pipe.data = srv;
    int rc = uv_pipe_open(&srv->pipe, fd);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->pipe, SERVER_BACKLOG, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "the listening socket handed over (%d): %s", fd, uv_strerror(rc));
        srv->freed = 1;
        uv_close((uv_handle_t *)&srv->pipe, on_listener_close);
        return NULL;
    }
    return srv;
}

int server_fd(const server_t *srv) {
    uv_os_fd_t fd;
    return uv_fileno((const uv_handle_t *)&srv->pipe, &fd) == 0 ? fd : -1;
}

const char *server_path(const server_t *srv) {
    return srv->path;
}

int server_readmit(server_t *srv, int fd, uv_pipe_t **pipe, session_peer_t *peer, char *err,
                   size_t errlen) {
    uv_pipe_t *client = malloc(sizeof(*client));
    if (client == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uv_pipe_init(srv->loop, client, 0);
    int rc = uv_pipe_open(client, fd);
    if (rc != 0) {
        snprintf(err, errlen, "connection %d handed over: %s", fd, uv_strerror(rc));
        uv_close((uv_handle_t *)client, on_refused_close);
        return -1;
    }
    if (access_users_join(&srv->users, peer->uid, UINT32_MAX) < 0) {
        snprintf(err, errlen, "out of memory");
        uv_close((uv_handle_t *)client, on_refused_close);
        return -1;
    }
    peer->leave = on_leave;
    peer->leave_data = srv;
    *pipe = client;
    return 0;
}

void server_close(server_t *srv) {
    if (srv == NULL || uv_is_closing((uv_handle_t *)&srv->pipe)) return;
    unlink(srv->path);
    uv_close((uv_handle_t *)&srv->pipe, on_listener_close);
}

void server_free(server_t *srv) {
    if (srv == NULL) return;
    server_close(srv);
    srv->freed = 1;
    if (srv->closed) server_release(srv);
}
