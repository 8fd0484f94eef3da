/* One RESP connection to one Redis node, on libuv: connect, TLS, deadlines, replies, pushes.
 * SPDX-License-Identifier: MIT
 *
 * The only place that touches a Redis socket. It drives its own uv_tcp_t
 * or uv_pipe_t, resolves host names with uv_getaddrinfo, optionally speaks
 * TLS through tls.h, formats requests itself (RESP arrays of bulk
 * strings, with resp_write.h, into one output buffer per connection) and
 * parses replies with hiredis's pure reader (redisReader*). hiredis's
 * async layer is not used.
 *
 * Life of a connection:
 *
 *   DOWN --resp_open--> CONNECTING --(TCP/Unix + TLS up)--> HANDSHAKE
 *        --resp_ready--> UP --(error, timeout, resp_close)--> DOWN
 *
 * resp_open() starts one attempt; the owner decides when to try again (the
 * backoff lives above). On reaching HANDSHAKE, on_open is called: the owner
 * sends its handshake commands (AUTH, SELECT, ...) with RESP_F_HANDSHAKE
 * and calls resp_ready() once they succeeded, or resp_close() if not. A
 * connection that goes down from any state calls on_down once, with the
 * reason, after every pending reply callback has run with an error.
 *
 * Callback rules, as libuv's:
 * - every reply callback fires exactly once: with the reply, or with an
 *   error when the connection fails, closes or the command's deadline
 *   (command_timeout_ms) passes;
 * - no callback fires before the call that queued it returns; a command
 *   refused at once (connection not up) gets its error from a zero-delay
 *   timer;
 * - after resp_free() no callback fires at all (pending reply callbacks
 *   get their error inside resp_free).
 *
 * Writes are coalesced: commands queued during one loop iteration go out in
 * one write just before the loop next polls. */
#ifndef DLOCK_RESP_H
#define DLOCK_RESP_H

#include <hiredis/read.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/backend/tls.h"
#include "daemon/util/timers.h"

#define RESP_ERR_LEN        256
/* Unread reply bytes a connection buffers before it gives up on the peer.
 * The reader allocates a bulk string only once all of it is buffered, so
 * this bounds one string too. */
#define RESP_READ_MAX       (64u * 1024 * 1024)
/* What one reply may claim, all its arrays and strings together, checked
 * as each array's header or string arrives, before anything is allocated
 * for it: an array's header alone ("*2147483647") would otherwise make the
 * reader allocate room for every element it announces (hiredis 0.14's
 * reader sets no limit). Our largest replies (a SCAN page, a batch of
 * SCRIPTS_BATCH_MAX operations, CLUSTER SHARDS) have some thousands of
 * elements and kilobytes of text. A reply past either fails its connection
 * as a protocol error does. */
#define RESP_ELEMENTS_MAX   (1024u * 1024)
#define RESP_STRINGS_MAX    RESP_READ_MAX

typedef struct resp_conn_s resp_conn_t;

typedef enum {
    RESP_DOWN = 0,
    RESP_CONNECTING,   /* resolving, connecting, TLS handshake */
    RESP_HANDSHAKE,    /* transport up; only RESP_F_HANDSHAKE commands go out */
    RESP_UP
} resp_state_t;

/* Flags for resp_send(). */
#define RESP_F_HANDSHAKE  1u   /* may be sent in RESP_HANDSHAKE */
#define RESP_F_NO_REPLY   2u   /* expects no reply (SUBSCRIBE and friends on a
                                  pub/sub connection: answers come as pushes) */

/* reply is NULL exactly when error is set (down, timeout, closed). A Redis
 * error reply (-ERR ...) is a reply of type REDIS_REPLY_ERROR, not an
 * error here. The reply is freed when the callback returns. */
typedef void (*resp_reply_cb)(void *data, redisReply *reply, const char *error);
/* A pub/sub push: an array whose first element is "message", "smessage",
 * "pmessage", "subscribe", "ssubscribe", "psubscribe", "unsubscribe",
 * "sunsubscribe" or "punsubscribe" (any case), on a connection that has
 * an on_push handler. Freed on return. */
typedef void (*resp_push_cb)(void *data, redisReply *push);
typedef void (*resp_open_cb)(void *data);
typedef void (*resp_down_cb)(void *data, const char *why);

typedef struct resp_addr_s {
    int is_unix;
    char host[256];               /* host name or address; Unix socket path */
    int port;
} resp_addr_t;

typedef struct resp_opts_s {
    const char *label;            /* for log lines, e.g. "command 127.0.0.1:6379" */
    uint32_t connect_timeout_ms;  /* resolve + connect + TLS handshake; 0: none */
    uint32_t command_timeout_ms;  /* per command, from when it is queued; 0: none */
    tls_ctx_t *tls;               /* NULL: plain; kept by the caller. TCP
                                     only: a Unix socket is always plain */
    const char *tls_server_name;  /* SNI and name checked; NULL: the host */
    resp_open_cb on_open;         /* NULL: straight from HANDSHAKE to UP */
    resp_down_cb on_down;
    resp_push_cb on_push;         /* NULL: no pushes expected; every reply,
                                     whatever its shape, answers a command */
    void *data;
} resp_opts_t;

/* A closed connection (RESP_DOWN). opts is copied, strings included. */
resp_conn_t *resp_new(uv_loop_t *loop, timers_t *timers, const resp_opts_t *opts);
/* Closes it (pending callbacks get "connection closed") and frees it once
 * its handles are closed; no callback of any kind fires after this.
 * Inside resp_free, commands refused earlier get their error too, and
 * on_down is not called. It may be called from any of c's callbacks. */
void resp_free(resp_conn_t *c);

/* Starts connecting to addr (DOWN only; otherwise a no-op returning -1).
 * The result comes later: on_open, or on_down with the reason ("connection
 * refused", "no such file or directory", "TLS: certificate verify failed:
 * ...", "no connection within connect_timeout_ms", ...). Never calls back
 * before it returns. A host name is resolved and its addresses tried in
 * order. Later drops say "no reply within command_timeout_ms", "connection
 * closed by the server", "reply longer than RESP_READ_MAX", "reply claims
 * more than RESP_ELEMENTS_MAX elements", "reply's strings longer than
 * RESP_STRINGS_MAX", the reader's "Protocol error, ...", a "TLS: ..."
 * error, or what resp_close was given.
 * resp_open may be called from on_down (not from a pending callback that
 * a drop runs before on_down: it returns -1 there). */
int resp_open(resp_conn_t *c, const resp_addr_t *addr);
/* HANDSHAKE -> UP. */
void resp_ready(resp_conn_t *c);
/* Drops the connection now: every pending callback gets an error naming
 * why, then on_down(why). A no-op when DOWN. */
void resp_close(resp_conn_t *c, const char *why);

/* New timeouts: the next connect and the commands queued from now on get
 * them; commands already queued keep their deadlines. */
void resp_set_timeouts(resp_conn_t *c, uint32_t connect_timeout_ms, uint32_t command_timeout_ms);

resp_state_t resp_state(const resp_conn_t *c);
/* The address of the last resp_open(). */
const resp_addr_t *resp_addr(const resp_conn_t *c);
/* Commands sent whose replies have not come yet. */
size_t resp_pending(const resp_conn_t *c);

/* resp_send() could not allocate the command's record: nothing was queued
 * and cb will never fire; the caller fails its own work. */
#define RESP_ENOMEM (-2)

/* Queues one command. cb may be NULL only with RESP_F_NO_REPLY. Returns 0
 * if queued; -1 if refused, and cb still fires once, later, with the
 * error; or RESP_ENOMEM, and cb never fires.
 * argvlen NULL: the arguments are C strings. argc must be at least 1.
 * With RESP_F_NO_REPLY nothing waits for a reply: cb (if any) is called
 * only when the command is refused. Refused without any callback: cb NULL
 * without RESP_F_NO_REPLY, or c inside resp_free(). Refusal reasons: "not
 * connected", "connection not ready (handshake)", "empty command", "out of
 * memory". */
int resp_send(resp_conn_t *c, int argc, const char **argv, const size_t *argvlen,
              unsigned flags, resp_reply_cb cb, void *data);
/* Writes queued output now rather than before the next poll: for callers
 * that queue commands from their own prepare callback, when this
 * connection's flusher may already have run in this loop iteration. */
void resp_flush(resp_conn_t *c);
/* The same for a command already in RESP form; cmd is copied. */
int resp_send_raw(resp_conn_t *c, const char *cmd, size_t len, unsigned flags,
                  resp_reply_cb cb, void *data);

#endif
