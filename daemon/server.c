/* The listening Unix socket: stale-file check, permissions without a window,
 * accepting connections.
 * SPDX-License-Identifier: MIT */
#include "server.h"

#include <errno.h>
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
    uint64_t last_accept_warning;   /* loop time of the last accept warning */
    char path[CONF_PATH_MAX + 1];
};

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
         * not spin. What errors still reach us are said once a second at
         * most. */
        uint64_t now = uv_now(listener->loop);
        if (now - srv->last_accept_warning >= SERVER_WARN_EVERY_MS) {
            srv->last_accept_warning = now;
            log_warn("accept: %s%s", uv_strerror(status),
                     status == UV_EMFILE || status == UV_ENFILE
                         ? " (out of file descriptors: connections are being refused)"
                         : "");
        }
        return;
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
    if (claim_path(srv->path, err, errlen) != 0) {
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
