/* Client connections: one state machine each; untagged requests in order, tagged ones at once.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_SESSION_H
#define DLOCK_SESSION_H

#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/access.h"
#include "daemon/lock/lockmgr.h"
#include "proto/proto.h"

/* Unparsed input kept while a request is in flight, before reading pauses. */
#define SESSION_INBUF_MAX (64 * 1024)
/* How often a session that stopped reading while a request waits (after a
 * half-close, or with a full input buffer) is checked for a gone peer. */
#define SESSION_HANGUP_CHECK_MS 100
/* Clients described in one CLIENTS reply (the count covers all of them). */
#define SESSION_CLIENTS_SHOWN 200
/* Shared read buffer handed to libuv; every read is consumed at once. */
#define SESSION_READ_CHUNK (64 * 1024)

typedef struct sessions_s sessions_t;

/* What a request got, for the metrics: OK, TIMEOUT, or ERR with a code. */
#define SESSION_RESULT_OK       0
#define SESSION_RESULT_TIMEOUT  1
#define SESSION_RESULT_ERR(e)   (1 + (int)(e))  /* e: a proto_err_t other than NONE */
#define SESSION_RESULTS         (1 + PROTO_ERR_COUNT)

typedef struct sessions_stats_s {
    uint64_t connections;       /* open now */
    uint64_t connections_total; /* accepted since start */
    uint64_t rejected;          /* refused at max_clients or max_clients_per_uid */
    uint64_t rejected_per_uid;  /* ... at max_clients_per_uid */
    uint64_t denied;            /* requests answered ERR DENIED by the access rules */
    uint64_t requests;
    uint64_t errors;            /* ERR replies */
    uint64_t output_overflows;  /* closed past max_output */
    uint64_t uptime_s;
    /* live restores (daemon/handover.c), carried from process to process */
    uint64_t upgrades;          /* hand-overs since the first start */
    uint64_t upgrade_failures;  /* hand-overs that failed, the old process serving on */
    uint64_t upgrade_ms;        /* the last hand-over's time, signal to serving */
    uint64_t upgrade_state_bytes; /* ... and its state's size */
    /* replies by verb (PROTO_CMD_NONE: an unknown one) and SESSION_RESULT_* */
    uint64_t replies[PROTO_CMD_COUNT][SESSION_RESULTS];
} sessions_stats_t;

sessions_t *sessions_new(uv_loop_t *loop, const conf_t *conf, lockmgr_t *locks);

/* A connection's peer, as admission (server.c) found it: SO_PEERCRED and
 * the groups the access rules judge. leave is called with its uid when
 * the connection ends (NULL: nothing to say). */
typedef void (*session_leave_cb)(void *data, uid_t uid);
typedef struct session_peer_s {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    access_peer_t access;
    session_leave_cb leave;
    void *leave_data;
} session_peer_t;

/* 1 while no connection may be taken: max_clients are open, or every one
 * is being closed (shutdown). */
int sessions_full(const sessions_t *ss);
/* A connection admission refused (INFO's rejected, rejected_per_uid). */
void sessions_count_refused(sessions_t *ss, int per_uid);
/* Serves an admitted connection: pipe is accepted and the session's now
 * (it frees it). */
void sessions_adopt(sessions_t *ss, uv_pipe_t *pipe, const session_peer_t *peer);

/* Closes every connection (their owners are dropped) and calls done once
 * all handles are closed. */
void sessions_close_all(sessions_t *ss, void (*done)(void *data), void *data);
void sessions_free(sessions_t *ss);

void sessions_stats(const sessions_t *ss, sessions_stats_t *out);

/* The latest !LOST events sent (the board's), newest first through
 * listing_ring_get(). */
struct listing_ring_s;
const struct listing_ring_s *sessions_lost(const sessions_t *ss);
lockmgr_t *sessions_locks(const sessions_t *ss);

/* ---- live restore (daemon/handover.c) ---- */
typedef struct session_s session_t;
struct statew_s;
struct stater_s;
/* Frozen, no connection is read and no request starts (nor is taken:
 * new connections are admitted but not read); replies still go out. */
void sessions_freeze(sessions_t *ss, int frozen);
/* NULL when every connection can be handed over as it is now, else why
 * not: a request in progress that is no wait, one closing. Frozen, it
 * becomes NULL once what is in flight is answered. */
const char *sessions_busy(const sessions_t *ss);
/* The counters, then every connection: a conn record with its socket's
 * descriptor, its owner's records, its calls; after each connection's,
 * each(data, fd) with that descriptor, for the caller to pass it on (and
 * to send what was written so far: a connection's records are never
 * split). */
void sessions_save(const sessions_t *ss, struct statew_s *w, void (*each)(void *data, int fd),
                   void *data);
/* The counters and what the sessions know of the process (a save's
 * records that are no connection's): 1 if word was one. */
int sessions_load(sessions_t *ss, const char *word, struct stater_s *r);
/* The peer's credentials of a conn record (after its descriptor), as
 * they were at its admission: groups and all. */
void sessions_load_peer(struct stater_s *r, session_peer_t *peer);
/* A conn record, its descriptor and peer read already into pipe (opened, not
 * reading) and its peer (admitted, server.c): the session made as it
 * was. NULL on an error, in r (pipe is then the caller's to close). */
session_t *sessions_load_conn(sessions_t *ss, uv_pipe_t *pipe, const session_peer_t *peer,
                              struct stater_s *r);
lock_owner_t *session_owner(const session_t *s);
/* A call record of s's. */
void session_load_call(session_t *s, struct stater_s *r);
/* The new process serves: every call that was in the lock manager is
 * asked again, in the order they were first asked, a TRY wait with what
 * was left of it; then the connections are read and the replies carried
 * over sent. */
void sessions_resume(sessions_t *ss);
/* Connections, those closing too. */
size_t sessions_count(const sessions_t *ss);
/* A hand-over: ok, or failed; ms and bytes of an ok one. */
void sessions_count_upgrade(sessions_t *ss, int ok, uint64_t ms, uint64_t bytes);

#endif
