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

/* A live restore: the same, on the listening socket fd handed over, whose
 * file is path (it stays as it is, whatever conf says now). */
server_t *server_adopt(uv_loop_t *loop, const conf_t *conf, sessions_t *sessions, int fd,
                       const char *path, char *err, size_t errlen);
/* The listening socket, and its file. */
int server_fd(const server_t *srv);
const char *server_path(const server_t *srv);
/* A connection handed over, on fd, of *peer (as it was admitted: its
 * credentials and groups): *pipe opened on it (not reading), and it counts
 * in its uid's connections however many there are (it was admitted once);
 * *peer's leave is set. -1 with err if fd is no connection. */
int server_readmit(server_t *srv, int fd, uv_pipe_t **pipe, session_peer_t *peer, char *err,
                   size_t errlen);

/* Stops accepting and removes the socket file. The server lives on for
 * the connections it admitted (their per-uid counts) until server_free(),
 * once every session is closed. */
void server_close(server_t *srv);
void server_free(server_t *srv);

#endif
