/* The words of the lock manager's answers and events: pure formatting, no I/O.
 * SPDX-License-Identifier: MIT */
#include "reply.h"

#include <stdio.h>

proto_err_t reply_err(lock_err_t err) {
    static const proto_err_t errs[] = {
        [LOCK_ERR_NOTHELD] = PROTO_ERR_NOTHELD,
        [LOCK_ERR_BACKEND] = PROTO_ERR_BACKEND,
        [LOCK_ERR_LIMIT] = PROTO_ERR_LIMIT,
        [LOCK_ERR_DENIED] = PROTO_ERR_DENIED,
        [LOCK_ERR_ARGS] = PROTO_ERR_ARGS,
        [LOCK_ERR_KIND] = PROTO_ERR_KIND,
        [LOCK_ERR_CANCELLED] = PROTO_ERR_CANCELLED,
    };
    return (size_t)err < sizeof(errs) / sizeof(errs[0]) ? errs[err] : PROTO_ERR_BACKEND;
}

const char *reply_error_words(const lock_reply_t *r, char *buf, size_t cap) {
    switch (r->why) {
    case LOCK_WHY_NONE:
        if (r->err != LOCK_ERR_NOTHELD || r->name == NULL) return NULL;
        /* MUNLOCK: which of its names */
        snprintf(buf, cap, "%.*s is not held by this connection", (int)r->len, r->name);
        return buf;
    case LOCK_WHY_BACKEND: return r->detail;
    case LOCK_WHY_SHUTDOWN: return "shutting down";
    case LOCK_WHY_NOMEM: return "out of memory";
    case LOCK_WHY_MAX_LOCKS: return "max_locks_per_client reached";
    case LOCK_WHY_MAX_WAITERS: return "max_waiters reached";
    case LOCK_WHY_MAX_LOCKS_UID: return "max_locks_per_uid reached";
    case LOCK_WHY_MAX_WAITERS_UID: return "max_waiters_per_uid reached";
    case LOCK_WHY_UPGRADE:
        return "upgrade not allowed: this connection holds a read lock of it (RUNLOCK it first)";
    case LOCK_WHY_NO_HOLDER: return "a semaphore has no one holder: STATUS tells its permits";
    case LOCK_WHY_MAX_OBSERVES:
        snprintf(buf, cap, "max_observes_per_client (%lld) reached", r->limit);
        return buf;
    case LOCK_WHY_RELEASE_AS: return lockmgr_mode_text(r->mode)->release;
    case LOCK_WHY_HELD_AS:
        snprintf(buf, cap, "%.*s is %s", (int)r->len, r->name, lockmgr_mode_text(r->mode)->held_as);
        return buf;
    case LOCK_WHY_UNSUPPORTED:
        snprintf(buf, cap, "%s are not available with %s", lockmgr_mode_text(r->mode)->plural,
                 r->detail);
        return buf;
    case LOCK_WHY_LEASE_MAX:
        snprintf(buf, cap, "lease_ms above %lld, the longest lease in quorum mode (rejoin_delay_ms)",
                 r->limit);
        return buf;
    case LOCK_WHY_PERMITS_RANGE:
        snprintf(buf, cap, "permits are 1 to %lld", r->limit);
        return buf;
    case LOCK_WHY_PERMITS_MAX:
        snprintf(buf, cap, "a connection holds at most %lld permits of a semaphore", r->limit);
        return buf;
    case LOCK_WHY_PERMITS_HELD:
        snprintf(buf, cap, "this connection holds %lld permits of it", r->limit);
        return buf;
    }
    return NULL;
}

int reply_format(char *out, size_t cap, unsigned flags, const lock_reply_t *r) {
    switch (r->type) {
    case LOCK_REPLY_LIST: return proto_reply_ok_list(out, cap, r->list, r->count);
    case LOCK_REPLY_GRANTED:
        if (flags & LOCK_WORD_FENCE) /* OK <fence>: a leader holds once */
            return proto_reply_ok_num(out, cap, (long long)r->fence);
        return proto_reply_ok_num2(out, cap, (unsigned long long)r->fence, r->holds);
    case LOCK_REPLY_LEADER: return proto_reply_leader(out, cap, r->fence, r->leader, r->leader_len);
    case LOCK_REPLY_VALUE: return proto_reply_ok_num(out, cap, r->value);
    case LOCK_REPLY_TIMEOUT: return proto_reply_timeout(out, cap, r->ttl_ms);
    case LOCK_REPLY_FREE: return proto_reply_ok(out, cap, "FREE");
    case LOCK_REPLY_TAKEN: return proto_reply_ok(out, cap, "TAKEN %lld", r->ttl_ms);
    case LOCK_REPLY_MINE:
        return proto_reply_ok(out, cap, "MINE %lld %lld %llu", r->holds, r->ttl_ms,
                              (unsigned long long)r->fence);
    case LOCK_REPLY_RW:
        return proto_reply_ok(out, cap, "%s %lld %lld %lld",
                              r->mode == LOCK_MODE_WRITE ? "WRITE" : "READ", r->holders,
                              r->holds, r->ttl_ms);
    case LOCK_REPLY_SEM: return proto_reply_ok(out, cap, "SEM %lld %lld", r->holders, r->holds);
    case LOCK_REPLY_HELD: {
        /* HELD <ttl_ms> <host> <dlockd pid> <pid> <uid>, "-" for unknown */
        char dpid[24] = "-", pid[24] = "-", uid[24] = "-";
        if (r->holder_dlockd_pid > 0) snprintf(dpid, sizeof(dpid), "%lld", r->holder_dlockd_pid);
        if (r->holder_pid > 0) snprintf(pid, sizeof(pid), "%lld", r->holder_pid);
        if (r->holder_uid >= 0) snprintf(uid, sizeof(uid), "%lld", r->holder_uid);
        return proto_reply_ok(out, cap, "HELD %lld %s %s %s %s", r->ttl_ms,
                              r->holder_host && r->holder_host[0] ? r->holder_host : "-", dpid,
                              pid, uid);
    }
    case LOCK_REPLY_ERROR: {
        char words[PROTO_REPLY_MAX];
        return proto_reply_error(out, cap < PROTO_ERROR_MAX ? cap : PROTO_ERROR_MAX,
                                 reply_err(r->err), reply_error_words(r, words, sizeof(words)));
    }
    }
    return -1;
}

int reply_event(char *out, size_t cap, const lock_event_t *ev) {
    switch (ev->type) {
    case LOCK_EVENT_LOST: {
        char name[PROTO_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%.*s", (int)ev->len, ev->name);
        return proto_event_lost(out, cap, name, reply_loss_reason(ev->why));
    }
    case LOCK_EVENT_LEADER:
        return proto_event_leader(out, cap, ev->name, ev->len, ev->fence, ev->value,
                                  ev->value_len);
    }
    return -1;
}

const char *reply_loss_reason(lock_loss_t why) {
    static const char *const reasons[] = {
        [LOCK_LOST_EXPIRED] = "expired",
        [LOCK_LOST_FORCED] = "forced",
        [LOCK_LOST_BACKEND] = "backend",
    };
    return (size_t)why < sizeof(reasons) / sizeof(reasons[0]) ? reasons[why] : "backend";
}
