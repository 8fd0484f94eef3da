/* The listening Unix socket: stale-file check, permissions without a window,
 * accepting connections.
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

#include "log.h"

struct server_s {
    uv_pipe_t pipe;       /* the listener; first, so the handle frees us */
    sessions_t *ss;
    log_once_t accept_log;  /* accept errors: said once, then summed up */
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

static void on_listener_close(uv_handle_t *handle) {
    free(handle->data);
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
    sessions_accept(srv->ss, listener);
}

server_t *server_listen(uv_loop_t *loop, const conf_t *conf, sessions_t *ss,
                        char *err, size_t errlen) {
    server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    srv->ss = ss;
    snprintf(srv->path, sizeof(srv->path), "%s", conf->socket);
    if (check_dir(srv->path, err, errlen) != 0 || claim_path(srv->path, err, errlen) != 0) {
        free(srv);
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
        uv_close((uv_handle_t *)&srv->pipe, on_listener_close);
        return NULL;
    }
    log_info("listening on %s (mode %04o)", srv->path, conf->socket_mode);
    return srv;
}

void server_close(server_t *srv) {
    if (srv == NULL) return;
    unlink(srv->path);
    uv_close((uv_handle_t *)&srv->pipe, on_listener_close);
}
