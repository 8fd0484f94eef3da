/* Which quorum nodes count: INFO server on each connection (restarts, rejoin delay) and TIME.
 * SPDX-License-Identifier: MIT
 *
 * Which nodes count toward a majority. A node counts once INFO server was
 * read on its connection: a node that (re)started less than
 * rejoin_delay_ms ago (its run_id changed, or its uptime is shorter) sits
 * out until it has been up that long, and a second address of a server
 * already a member never counts. Its TIME, read every
 * QUORUM_CLOCK_EVERY_MS against our clock (clock_skew.h), keeps a node
 * whose clock runs off beyond clock_drift_ms out too. The rules are
 * quorum_vote.c's; quorum.c asks quorum_clock_counts() before each send. */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "daemon/backend/quorum_internal.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* Each node's TIME is read this often against our clock (clock_skew.h),
 * and a rate measured over at most this window. */
#define QUORUM_CLOCK_EVERY_MS 1000
#define QUORUM_CLOCK_WINDOW_US 5000000ULL

/* ---- which nodes count -------------------------------------------------------- */

static quorum_vote_node_t vote_node(const qnode_t *qn) {
    quorum_vote_node_t n = {
        .up = qn->nd != NULL && node_up(qn->nd),
        .checked = qn->checked,
        .same_as = qn->same_as,
        .counts_at = qn->counts_at,
        .clock_off = qn->clock_off,
    };
    return n;
}

int quorum_clock_counts(const qnode_t *qn) {
    quorum_vote_node_t n = vote_node(qn);
    return quorum_vote_counts(&n, timers_now(qn->q->timers));
}

const char *quorum_clock_state(const qnode_t *qn) {
    quorum_vote_node_t n = vote_node(qn);
    return quorum_vote_node_state(&n, timers_now(qn->q->timers));
}

static void on_rejoin(timers_entry_t *t) {
    qnode_t *qn = container_of(t, qnode_t, rejoin);
    if (!quorum_clock_counts(qn)) return;
    log_info("quorum: %s now counts toward a majority", qn->label);
    backend_notify_state(&qn->q->base);
}

/* The connection's INFO server: has the node restarted lately? */
static void on_info(void *data, redisReply *r, const char *error) {
    qnode_t *qn = data;
    quorum_t *q = qn->q;
    quorum_vote_info_t info;
    char why[BACKEND_ERR_LEN];
    const char *run_id = info.run_id;
    if (q->closed || !node_up(qn->nd)) return;
    uint64_t now = timers_now(q->timers);
    int rc = QUORUM_VOTE_INFO_MISSING;
    if (error == NULL && r != NULL && r->type == REDIS_REPLY_STRING)
        rc = quorum_vote_info(r->str, &info, why, sizeof(why));
    if (rc != 0) {
        /* Nothing tells whether it lost its data: it sits out a whole delay
         * from now, as if it had just started, and its run_id is not taken. */
        if (rc == QUORUM_VOTE_INFO_BAD)
            log_error("quorum: %s: bad INFO server: %s: it counts toward a majority in %u ms "
                      "(rejoin_delay_ms)", qn->label, why, q->rejoin_delay_ms);
        else
            log_warn("quorum: %s: cannot read INFO server (%s): it counts toward a majority in "
                     "%u ms (rejoin_delay_ms)", qn->label, error ? error : "unexpected reply",
                     q->rejoin_delay_ms);
        qn->counts_at = now + q->rejoin_delay_ms;
        info.run_id[0] = '\0';
    } else {
        qn->counts_at = quorum_vote_counts_at(now, info.uptime_s, q->rejoin_delay_ms);
        if (qn->counts_at > now) {
            int restarted = qn->run_id[0] != '\0' && strcmp(qn->run_id, run_id) != 0;
            log_warn("quorum: %s %s %llu s ago: it may have lost locks, so it counts toward a "
                     "majority only in %llu ms (rejoin_delay_ms)", qn->label,
                     restarted ? "restarted (new run_id)" : "started",
                     (unsigned long long)(info.uptime_s > 0 ? info.uptime_s - 1 : 0),
                     (unsigned long long)(qn->counts_at - now));
        }
    }
    if (run_id[0] != '\0') snprintf(qn->run_id, sizeof(qn->run_id), "%s", run_id);
    qn->same_as = 0;
    for (unsigned i = 0; i < q->n && run_id[0] != '\0'; i++) {
        const qnode_t *o = &q->nodes[i];
        if (o == qn || o->same_as || strcmp(o->run_id, qn->run_id) != 0) continue;
        if (!qn->same_as)
            log_error("quorum: %s is the same Redis server as %s (run_id %s): it does not count "
                      "as a node of its own; name independent servers in quorum", qn->label,
                      o->label, run_id);
        qn->same_as = (int)i + 1;
        break;
    }
    qn->checked = 1;
    if (qn->counts_at > now) timers_start_at(q->timers, &qn->rejoin, qn->counts_at, on_rejoin);
    backend_notify_state(&q->base);
}

/* ---- the node's clock ---------------------------------------------------------- */

static uint64_t mono_us(void) {
    return uv_hrtime() / 1000;
}

static void on_clock_timer(timers_entry_t *t);

static void clock_judge(qnode_t *qn, const clock_skew_sample_t *now) {
    quorum_t *q = qn->q;
    int64_t ppm, err;
    if (!qn->clock_have) {
        qn->clock_base = *now;
        qn->clock_have = 1;
        return;
    }
    if (clock_skew_rate(&qn->clock_base, now, &ppm, &err) != 0) return;
    int64_t bound = clock_skew_bound_ppm(q->drift_ms, q->rejoin_delay_ms);
    int verdict = clock_skew_judge(ppm, err, bound);
    if (verdict == 1 && !qn->clock_off) {
        qn->clock_off = 1;
        log_warn("quorum: %s: its clock runs %+lld ppm (+- %lld) against ours, more than "
                 "clock_drift_ms allows (%lld ppm of the longest lease): it does not count "
                 "toward a majority until it keeps time", qn->label, (long long)ppm,
                 (long long)err, (long long)bound);
        backend_notify_state(&q->base);
    } else if (verdict == 0 && qn->clock_off) {
        qn->clock_off = 0;
        log_info("quorum: %s: its clock keeps time again (%+lld ppm)", qn->label, (long long)ppm);
        backend_notify_state(&q->base);
    }
    if (now->got_us - qn->clock_base.got_us >= QUORUM_CLOCK_WINDOW_US) qn->clock_base = *now;
}

static void on_time(void *data, redisReply *r, const char *error) {
    qnode_t *qn = data;
    quorum_t *q = qn->q;
    if (q->closed || !node_up(qn->nd)) return;
    clock_skew_sample_t smp = {.sent_us = qn->clock_sent_us, .got_us = mono_us()};
    if (error == NULL && r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        clock_skew_parse_time(r->element[0]->str, r->element[0]->len, r->element[1]->str,
                              r->element[1]->len, &smp.node_us) == 0)
        clock_judge(qn, &smp);
    timers_start(q->timers, &qn->clock_timer, QUORUM_CLOCK_EVERY_MS, on_clock_timer);
}

static void clock_ask(qnode_t *qn) {
    static const char *argv[] = {"TIME"};
    static const size_t argvlen[] = {4};
    if (!node_up(qn->nd)) return;
    qn->clock_sent_us = mono_us();
    if (node_command(qn->nd, 1, argv, argvlen, on_time, qn) != 0)
        timers_start(qn->q->timers, &qn->clock_timer, QUORUM_CLOCK_EVERY_MS, on_clock_timer);
}

static void on_clock_timer(timers_entry_t *t) {
    clock_ask(container_of(t, qnode_t, clock_timer));
}

void quorum_clock_check(qnode_t *qn) {
    quorum_t *q = qn->q;
    qn->checked = 0;
    timers_stop(q->timers, &qn->rejoin);
    timers_stop(q->timers, &qn->clock_timer);
    qn->clock_have = 0;
    if (node_up(qn->nd)) {
        clock_ask(qn);
        static const char *argv[] = {"INFO", "server"};
        static const size_t argvlen[] = {4, 6};
        if (node_command(qn->nd, 2, argv, argvlen, on_info, qn) != 0)
            log_warn("quorum: %s: cannot ask INFO", qn->label);
    }
}

void quorum_clock_stop(qnode_t *qn) {
    timers_stop(qn->q->timers, &qn->rejoin);
    timers_stop(qn->q->timers, &qn->clock_timer);
}
