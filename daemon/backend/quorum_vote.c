/* The quorum's vote rules, pure: N nodes' answers to one op in, one decision out.
 * SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/quorum_vote.h"

/* ---- which nodes count -------------------------------------------------------- */

int quorum_vote_counts(const quorum_vote_node_t *n, uint64_t now) {
    return n->up && n->checked && !n->same_as && !n->clock_off && now >= n->counts_at;
}

const char *quorum_vote_node_state(const quorum_vote_node_t *n, uint64_t now) {
    if (!n->up) return "down";
    if (!n->checked) return "checking";
    if (n->same_as) return "duplicate";
    if (n->clock_off) return "clock";
    return quorum_vote_counts(n, now) ? "up" : "rejoining";
}

/* The value of "key:<value>" in INFO's text: its start, and its length up
 * to the line's end; NULL when no line has it. */
static const char *info_field(const char *info, const char *key, size_t *len) {
    size_t klen = strlen(key);
    for (const char *p = info; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) != 0 || p[klen] != ':') continue;
        p += klen + 1;
        *len = strcspn(p, "\r\n");
        return p;
    }
    return NULL;
}

/* s[0 .. len) is all digits, at most QUORUM_VOTE_UPTIME_MAX, and its line
 * ends right after it ("\r\n" as INFO has it, "\n", or the text's end). */
static int parse_uptime(const char *s, size_t len, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0) return -1;
    if (s[len] == '\r' ? s[len + 1] != '\n' : s[len] != '\n' && s[len] != '\0') return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (QUORUM_VOTE_UPTIME_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int quorum_vote_info(const char *info, quorum_vote_info_t *out, char *err, size_t errlen) {
    size_t rlen, ulen;
    const char *run_id = info_field(info, "run_id", &rlen);
    const char *up = info_field(info, "uptime_in_seconds", &ulen);
    if (run_id == NULL || up == NULL) {
        snprintf(err, errlen, "no %s", run_id == NULL ? "run_id" : "uptime_in_seconds");
        return QUORUM_VOTE_INFO_MISSING;
    }
    if (rlen >= sizeof(out->run_id)) rlen = sizeof(out->run_id) - 1;
    memcpy(out->run_id, run_id, rlen);
    out->run_id[rlen] = '\0';
    if (parse_uptime(up, ulen, &out->uptime_s) != 0) {
        snprintf(err, errlen, "uptime_in_seconds \"%.*s\" is not a number of seconds",
                 (int)(ulen < 40 ? ulen : 40), up);
        return QUORUM_VOTE_INFO_BAD;
    }
    return 0;
}

uint64_t quorum_vote_counts_at(uint64_t now, uint64_t uptime_s, uint32_t rejoin_delay_ms) {
    /* Whole seconds of wall clock, start and now each rounded down: it
     * started less than (uptime + 1) s ago, and maybe just after
     * (uptime - 1) s ago. Count from the latest. */
    uint64_t uptime_ms = uptime_s * 1000;
    uptime_ms = uptime_ms >= 1000 ? uptime_ms - 1000 : 0;
    uint64_t started = now > uptime_ms ? now - uptime_ms : 0;
    return started + rejoin_delay_ms;
}

/* ---- one op's answers ------------------------------------------------------------ */

static int ok(const quorum_vote_t *v) {
    return v->done && v->res.status == BACKEND_OK;
}

static int granted(const quorum_vote_t *v) {
    return ok(v) && v->res.outcome == BACKEND_GRANTED;
}

int quorum_vote_yes(const quorum_vote_t *v) {
    const backend_result_t *r = &v->res;
    switch (v->kind) {
    case BACKEND_ACQUIRE:
        return r->outcome == BACKEND_GRANTED || (r->outcome == BACKEND_REENTERED && !v->multi);
    case BACKEND_RENEW: return r->renewal == BACKEND_RENEWED;
    default: return 1;
    }
}

quorum_vote_tally_t quorum_vote_tally(const quorum_vote_t *v, unsigned n) {
    quorum_vote_tally_t t = {0};
    for (unsigned i = 0; i < n; i++) {
        if (!v[i].counts) continue;
        if (!v[i].done) t.pending++;
        else if (v[i].res.status != BACKEND_OK) t.silent++;
        else {
            t.answered++;
            if (quorum_vote_yes(&v[i])) t.yes++;
            else t.no++;
        }
    }
    return t;
}

/* ---- acquire ------------------------------------------------------------------- */

quorum_vote_acquire_t quorum_vote_acquire(const quorum_vote_t *v, unsigned n, unsigned majority) {
    quorum_vote_acquire_t a = {.what = QUORUM_VOTE_WAIT};
    quorum_vote_tally_t t = quorum_vote_tally(v, n);
    if (t.yes < majority) {
        if (t.yes + t.pending < majority) a.what = QUORUM_VOTE_FAIL;
        return a;
    }
    int reentry = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ok(&v[i])) continue;
        if (v[i].res.outcome == BACKEND_REENTERED && !v[i].multi) {
            reentry = 1;
            if (v[i].res.holds > a.holds) a.holds = v[i].res.holds;
        } else if (v[i].counts && v[i].res.outcome == BACKEND_GRANTED &&
                   v[i].res.fence > a.fence) {
            a.fence = v[i].res.fence;
        }
    }
    if (reentry) {
        /* The owner held it already (a reentry, or a hold its release has
         * not cleared): the lock manager knows which. */
        a.what = QUORUM_VOTE_REENTERED;
        a.fence = 0;
        return a;
    }
    a.what = QUORUM_VOTE_FENCE;
    a.holds = 0;
    unsigned agree = 0;
    for (unsigned i = 0; i < n; i++)
        if (v[i].counts && granted(&v[i]) && v[i].res.fence >= a.fence) agree++;
    a.agree = agree >= majority;
    return a;
}

unsigned char quorum_vote_raised(backend_status_t status, long long holds) {
    if (status != BACKEND_OK) return QUORUM_VOTE_RAISE_NONE;
    return holds == 1 ? QUORUM_VOTE_RAISED : QUORUM_VOTE_RAISE_NOT_HELD;
}

int quorum_vote_needs_raise(const quorum_vote_t *v, uint64_t fence, int raise_sent) {
    return !raise_sent && granted(v) && v->res.fence < fence;
}

quorum_vote_decision_t quorum_vote_fence_check(const quorum_vote_t *v, unsigned n,
                                               unsigned majority, uint64_t fence,
                                               const unsigned char *raise_sent,
                                               const unsigned char *raised, unsigned raising) {
    unsigned sure = 0, maybe = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!v[i].counts || !granted(&v[i])) continue;
        if (v[i].res.fence >= fence || raised[i] == QUORUM_VOTE_RAISED) sure++;
        else if (raise_sent[i] && raised[i] == QUORUM_VOTE_RAISE_OUT) maybe++;
    }
    unsigned pending = quorum_vote_tally(v, n).pending;
    if (sure >= majority) return QUORUM_VOTE_GRANT;
    if (sure + maybe + pending < majority || (raising == 0 && pending == 0))
        return QUORUM_VOTE_FAIL;
    return QUORUM_VOTE_WAIT;
}

uint32_t quorum_vote_drift(uint32_t drift_ms, uint32_t lease_ms) {
    return drift_ms != CONF_DRIFT_AUTO ? drift_ms : lease_ms / 100 + 2;
}

int quorum_vote_lease_left(uint64_t elapsed, uint32_t lease_ms, uint32_t drift_ms) {
    return elapsed + drift_ms < lease_ms;
}

int quorum_vote_straggle(const quorum_vote_t *v, unsigned n, unsigned majority) {
    quorum_vote_tally_t t = quorum_vote_tally(v, n);
    return t.no > 0 && t.pending > 0 && t.yes < majority;
}

quorum_vote_undo_t quorum_vote_undo(const quorum_vote_t *v, int reentry) {
    if (ok(v) && v->res.outcome == BACKEND_TAKEN) return QUORUM_VOTE_UNDO_NONE;
    if (v->done && v->res.status == BACKEND_FAILED) return QUORUM_VOTE_UNDO_NONE;
    int reentered = ok(v) && v->res.outcome == BACKEND_REENTERED;
    /* Where the answer is not known, a reentry may have added a hold to
     * one that was there before: leave it (the owner's release ends it). */
    if (!reentered && reentry && !ok(v)) return QUORUM_VOTE_UNDO_NONE;
    return reentered ? QUORUM_VOTE_UNDO_DROP : QUORUM_VOTE_UNDO_RELEASE;
}

/* A TTL for sorting: no expiry (-1) last. */
static long long ttl_key(long long ttl) {
    return ttl < 0 ? LLONG_MAX : ttl;
}

long long quorum_vote_free_in(const quorum_vote_t *v, unsigned n, unsigned majority) {
    long long ttls[CONF_QUORUM_MAX];
    unsigned k = 0, free_now = 0;
    for (unsigned i = 0; i < n && i < CONF_QUORUM_MAX; i++) {
        if (!v[i].counts || !ok(&v[i])) continue;
        if (v[i].res.outcome == BACKEND_TAKEN) ttls[k++] = v[i].res.ttl_ms;
        else free_now++;
    }
    if (free_now + k < majority || k == 0 || free_now >= majority) return QUORUM_VOTE_SPLIT;
    /* sort: few */
    for (unsigned i = 1; i < k; i++)
        for (unsigned j = i; j > 0 && ttl_key(ttls[j - 1]) > ttl_key(ttls[j]); j--) {
            long long x = ttls[j];
            ttls[j] = ttls[j - 1];
            ttls[j - 1] = x;
        }
    return ttls[majority - free_now - 1];
}

/* ---- a multi-name acquire ------------------------------------------------------ */

void quorum_vote_multi_fences(const quorum_vote_t *v, const uint64_t *const *values, unsigned n,
                              const char *reentry, size_t nnames, uint64_t *fence) {
    for (size_t j = 0; j < nnames; j++) {
        fence[j] = 0;
        for (unsigned i = 0; i < n; i++)
            if (v[i].counts && granted(&v[i]) && values[i][j] > fence[j]) fence[j] = values[i][j];
    }
    (void)reentry; /* a reentry's most holds, a new name's F: both the greatest */
}

int quorum_vote_multi_agrees(const uint64_t *values, const char *reentry, size_t nnames,
                             const uint64_t *fence) {
    for (size_t j = 0; j < nnames; j++)
        if (reentry[j] == 'n' && values[j] < fence[j]) return 0;
    return 1;
}

quorum_vote_mundo_t quorum_vote_multi_undo(const quorum_vote_t *v) {
    if (ok(v)) return v->res.outcome == BACKEND_GRANTED ? QUORUM_VOTE_MUNDO_ALL
                                                        : QUORUM_VOTE_MUNDO_NONE;
    if (v->done && v->res.status == BACKEND_FAILED) return QUORUM_VOTE_MUNDO_NONE;
    return QUORUM_VOTE_MUNDO_NEW;
}

quorum_vote_mfail_t quorum_vote_multi_fail(const quorum_vote_t *v, unsigned n, unsigned majority) {
    quorum_vote_mfail_t f = {.down = 1, .outcome = BACKEND_TAKEN};
    unsigned count[BACKEND_HOLD_GONE + 1] = {0};
    int first[BACKEND_HOLD_GONE + 1];
    for (unsigned o = 0; o <= BACKEND_HOLD_GONE; o++) first[o] = -1;
    for (unsigned i = 0; i < n; i++) {
        if (!v[i].counts || !ok(&v[i]) || v[i].res.outcome == BACKEND_GRANTED) continue;
        backend_outcome_t o = v[i].res.outcome;
        if (o > BACKEND_HOLD_GONE) continue;
        if (first[o] < 0) first[o] = (int)i;
        count[o]++;
        f.down = 0;
    }
    if (f.down) return f;
    static const backend_outcome_t order[] = {BACKEND_HOLD_GONE, BACKEND_WRONG_KIND};
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        backend_outcome_t o = order[k];
        if (count[o] + majority <= n) continue;
        f.outcome = o;
        f.which = v[first[o]].res.which;
        f.held = v[first[o]].res.held;
        return f;
    }
    if (count[BACKEND_REENTERED] > 0) {
        f.outcome = BACKEND_REENTERED;
        f.which = v[first[BACKEND_REENTERED]].res.which;
        f.holds = v[first[BACKEND_REENTERED]].res.holds;
        return f;
    }
    /* TAKEN: the name most taken nodes name; with none taken (a kind or a
     * hold gone on too few nodes to decide), the first refusal's. */
    f.outcome = BACKEND_TAKEN;
    unsigned best = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!v[i].counts || !ok(&v[i]) || v[i].res.outcome == BACKEND_GRANTED) continue;
        if (count[BACKEND_TAKEN] > 0 && v[i].res.outcome != BACKEND_TAKEN) continue;
        unsigned same = 0;
        for (unsigned j = 0; j < n; j++)
            if (v[j].counts && ok(&v[j]) && v[j].res.outcome == v[i].res.outcome &&
                v[j].res.which == v[i].res.which)
                same++;
        if (same > best) {
            best = same;
            f.which = v[i].res.which;
        }
    }
    return f;
}

/* ---- the other ops ----------------------------------------------------------- */

quorum_vote_decision_t quorum_vote_renew(const quorum_vote_t *v, unsigned n, unsigned majority) {
    quorum_vote_tally_t t = quorum_vote_tally(v, n);
    if (t.yes >= majority) return QUORUM_VOTE_RENEWED;
    if (t.yes + t.pending >= majority) return QUORUM_VOTE_WAIT;
    /* The silent ones might have renewed it: not known. */
    if (t.yes + t.silent >= majority) return QUORUM_VOTE_DOWN;
    /* Nor while fewer nodes say it is gone than would rule out a majority:
     * the others (not counting now: cut off, rejoining) may hold it still. */
    if (n - t.no >= majority) return QUORUM_VOTE_DOWN;
    for (unsigned i = 0; i < n; i++)
        if (ok(&v[i]) && v[i].res.renewal == BACKEND_FORCED) return QUORUM_VOTE_FORCED;
    return QUORUM_VOTE_GONE;
}

quorum_vote_decision_t quorum_vote_release(const quorum_vote_t *v, unsigned n,
                                           unsigned majority, long long *holds,
                                           int *others_waiting) {
    quorum_vote_tally_t t = quorum_vote_tally(v, n);
    if (t.answered < majority && t.pending > 0 && t.answered + t.pending >= majority)
        return QUORUM_VOTE_WAIT;
    if (t.answered < majority) return QUORUM_VOTE_DOWN;
    *holds = -1;
    *others_waiting = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ok(&v[i])) continue;
        if (v[i].res.holds > *holds) *holds = v[i].res.holds;
        if (v[i].res.others_waiting) *others_waiting = 1;
    }
    return QUORUM_VOTE_DONE;
}

quorum_vote_decision_t quorum_vote_ask_all(const quorum_vote_t *v, unsigned n,
                                           unsigned majority) {
    for (unsigned i = 0; i < n; i++)
        if (!v[i].done) return QUORUM_VOTE_WAIT;
    return quorum_vote_tally(v, n).answered < majority ? QUORUM_VOTE_DOWN : QUORUM_VOTE_DONE;
}

int quorum_vote_removed(const quorum_vote_t *v, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        if (v[i].counts && ok(&v[i]) && v[i].res.removed) return 1;
    return 0;
}

/* Sorted down, the k-th (from 1). */
static long long kth_down(long long *x, unsigned n, unsigned k) {
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && x[j - 1] < x[j]; j--) {
            long long t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return x[k - 1];
}

void quorum_vote_status(const quorum_vote_t *v, unsigned n, unsigned majority,
                        long long *ttl_ms, long long *holds) {
    long long ttl[CONF_QUORUM_MAX], h[CONF_QUORUM_MAX];
    unsigned k = 0;
    for (unsigned i = 0; i < n && i < CONF_QUORUM_MAX; i++) {
        if (!v[i].counts || !ok(&v[i])) continue;
        ttl[k] = v[i].res.ttl_ms == -1 ? LLONG_MAX : v[i].res.ttl_ms;
        h[k] = v[i].res.holds;
        k++;
    }
    /* What a majority has at least: sorted down, the majority-th. */
    if (k < majority) { /* not DONE: nothing a majority has */
        *ttl_ms = -2;
        *holds = 0;
        return;
    }
    long long t = kth_down(ttl, k, majority);
    *ttl_ms = t == LLONG_MAX ? -1 : t;
    *holds = kth_down(h, k, majority);
}

void quorum_vote_who(const quorum_vote_t *v, const backend_who_t *who, unsigned n,
                     backend_who_t *out, long long *ttl_ms) {
    unsigned best = 0, best_votes = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!v[i].counts || !ok(&v[i]) || who[i].owner[0] == '\0') continue;
        unsigned votes = 0;
        for (unsigned j = 0; j < n; j++)
            if (v[j].counts && ok(&v[j]) && strcmp(who[j].owner, who[i].owner) == 0) votes++;
        if (votes > best_votes) {
            best_votes = votes;
            best = i;
        }
    }
    if (best_votes == 0) {
        *ttl_ms = -2;
        out->owner[0] = out->daemon[0] = '\0';
        return;
    }
    *ttl_ms = v[best].res.ttl_ms;
    *out = who[best];
    for (unsigned j = 0; j < n && out->daemon[0] == '\0'; j++)
        if (strcmp(who[j].owner, out->owner) == 0)
            memcpy(out->daemon, who[j].daemon, sizeof(out->daemon));
}
