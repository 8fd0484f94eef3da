/* The listening Unix socket: creation with safe permissions, accepting, removal.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_SERVER_H
#define DLOCK_SERVER_H

#include <stddef.h>
#include <uv.h>

#include "conf/conf.h"
#include "session.h"

#define SERVER_BACKLOG 511
#define SERVER_ERR_LEN 256
#define SERVER_WARN_EVERY_MS 1000   /* at most one accept warning this often */

typedef struct server_s server_t;

/* Binds conf->socket with conf->socket_mode and starts accepting into ss.
 * A stale socket file is removed; a live dlockd on the path is an error.
 * Returns NULL with a message in err. */
server_t *server_listen(uv_loop_t *loop, const conf_t *conf, sessions_t *ss,
                        char *err, size_t errlen);

/* A live restore: the same, on the listening socket fd handed over (its
 * file stays as it is). */
server_t *server_adopt(uv_loop_t *loop, const conf_t *conf, sessions_t *sessions, int fd,
                       char *err, size_t errlen);
/* The listening socket. */
int server_fd(const server_t *srv);
/* A connection handed over, on fd: *pipe opened on it (not reading), *peer
 * read as at its admission and counted in its uid's connections, however
 * many (it was admitted once). -1 with err if fd is no connection. */
int server_readmit(server_t *srv, int fd, uv_pipe_t **pipe, session_peer_t *peer, char *err,
                   size_t errlen);

/* Stops accepting and removes the socket file. The server lives on for
 * the connections it admitted (their per-uid counts) until server_free(),
 * once every session is closed. */
void server_close(server_t *srv);
void server_free(server_t *srv);

#endif
