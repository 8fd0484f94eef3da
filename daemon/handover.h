/* Live restore: SIGUSR2 hands the listening socket, every connection and every hold to a new dlockd.
 * SPDX-License-Identifier: MIT
 *
 * The old process starts the binary now at its own path, with its
 * arguments, and serves on while the new one reads the configuration and
 * connects to Redis. When the new one says HELLO, the old one stops
 * reading its clients, waits until nothing is in flight to Redis, and
 * streams its state over their channel (daemon/util/statefmt.h records in
 * frames, each with the connections' descriptors it names, SCM_RIGHTS),
 * which the new one takes as it comes: every connection and hold as it
 * was. It says READY; the old one says GO, tells systemd the new main pid
 * and exits at once, releasing nothing; the new one asks for every wait
 * again, in order, and serves. Anything that goes wrong before GO (the
 * binary is missing, exits, does not know the state's version, cannot
 * reach Redis, is not ready in time) changes nothing: the old process
 * kills what it started and serves on. */
#ifndef DLOCK_HANDOVER_H
#define DLOCK_HANDOVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/backend/backend.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/session.h"

/* The state's format: a process reads only its own version (docs: which
 * versions hand over to which). */
#define HANDOVER_STATE_VERSION 1
/* How long the old process waits for nothing to be in flight to Redis
 * before it gives up and serves on. */
#define HANDOVER_DRAIN_MS 5000
/* How long the new process may take to say HELLO, and then READY once the
 * state is sent (READY: at most renew_every_ms, as the old process renews
 * nothing while it streams and waits). */
#define HANDOVER_TIMEOUT_MS 10000
/* How long the new process waits for Redis before it gives up. */
#define HANDOVER_BACKEND_WAIT_MS 5000
/* A frame's records are sent once they pass this many bytes ... */
#define HANDOVER_FRAME_BYTES (64 * 1024)
/* ... or name this many descriptors (SCM_RIGHTS takes at most 253). */
#define HANDOVER_FRAME_FDS 250
/* The environment variable that tells a process it is a successor:
 * "<version>,<channel fd>,<nodes up>,<uuid>". */
#define HANDOVER_ENV "DLOCKD_HANDOVER"
/* A test hook: the version the old process says its state has. */
#define HANDOVER_TEST_VERSION_ENV "DLOCKD_TEST_STATE_VERSION"
/* dlockd --upgrade waits this long for the hand-over's end. */
#define HANDOVER_REQUEST_WAIT_MS 30000

/* What a hand-over hands over: main's parts. */
typedef struct handover_parts_s {
    uv_loop_t *loop;
    const conf_t *conf;
    backend_t *backend;
    lockmgr_t *locks;
    sessions_t *sessions;
    server_t *server;
    metrics_t *metrics;        /* NULL: none */
} handover_parts_t;

/* ---- the old process ---- */
typedef struct handover_s handover_t;
/* exe: the binary's path as it was at start; argv: main's. */
handover_t *handover_new(const handover_parts_t *parts, const char *exe, char *const *argv);
/* SIGUSR2: starts a hand-over, unless one runs. On success the process
 * exits from inside the loop. */
void handover_start(handover_t *h);
void handover_free(handover_t *h);

/* ---- the new process ---- */
typedef struct handover_in_s {
    int channel;               /* to the old process */
    char uuid[BACKEND_UUID_MAX]; /* its owner ids' prefix, kept */
    size_t nodes_up;           /* the Redis nodes it had up */
    /* the state's head */
    long old_pid;
    uint64_t signal_ms;        /* when the old process got SIGUSR2 (CLOCK_MONOTONIC, ms) */
    size_t holds;              /* the holds to come */
    int listen_fd;
    char listen_path[CONF_PATH_MAX + 1]; /* its file */
    int metrics_fd;            /* -1: none */
    /* taking it */
    size_t bytes;              /* of state read */
    size_t conns, calls;
    session_t *cur;            /* the connection the records are of */
} handover_in_t;

/* 1 if this process was started by a hand-over (HANDOVER_ENV). */
int handover_is_successor(void);
/* Reads HANDOVER_ENV: 0, or -1 with why in err (the version, ...). */
int handover_begin(handover_in_t *in, char *err, size_t errlen);
/* Waits (running the loop) until Redis answers, with at least want_up
 * nodes up (the old process's); 0, or -1 with err. */
int handover_await_backend(uv_loop_t *loop, backend_t *b, size_t want_up, char *err,
                           size_t errlen);
/* Reads the state's head (where the sockets are); 0, or -1 with err. */
int handover_head(handover_in_t *in, char *err, size_t errlen);
/* Says HELLO: this process is ready to take over, and the old one stops
 * serving to send the rest. 0, or -1 with err. */
int handover_hello(handover_in_t *in, char *err, size_t errlen);
/* Takes every connection, hold and counter as the frames come. 0, or -1
 * with err. */
int handover_restore(handover_in_t *in, const handover_parts_t *parts, char *err,
                     size_t errlen);
/* Says READY and waits for GO: 0 to serve on, -1 if the old process gave
 * up (then exit at once, touching nothing). */
int handover_commit(handover_in_t *in);
/* Tells the old process why this one cannot take over; exits 1. */
void handover_refuse(handover_in_t *in, const char *why) __attribute__((noreturn));
/* Serving: every wait asked again, the connections read. */
void handover_resume(handover_in_t *in, const handover_parts_t *parts);

/* dlockd --upgrade: SIGUSR2 to the dlockd on socket, and its outcome. The
 * exit status: 0 handed over, 1 not. */
int handover_request(const char *path);

#endif
