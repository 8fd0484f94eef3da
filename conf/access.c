/* Access rules: parsing [access] keys, checking them, matching peers and names.
 * SPDX-License-Identifier: MIT */
#include "access.h"

#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCESS_ID_MAX 2147483647u  /* the largest uid or gid written as a number */

static uint64_t next_generation = 0;

static const char *const right_names[] = {"none", "read", "lock", "admin"};

const char *access_right_name(access_right_t right) {
    return (unsigned)right < sizeof(right_names) / sizeof(right_names[0]) ? right_names[right]
                                                                         : "?";
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (err == NULL || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

access_rules_t *access_rules_new(void) {
    access_rules_t *r = calloc(1, sizeof(*r));
    if (r != NULL) r->generation = ++next_generation;
    return r;
}

static void rule_free(access_rule_t *rule) {
    for (size_t i = 0; i < rule->nglobs; i++) free(rule->globs[i]);
    free(rule->globs);
    free(rule->prefix);
}

/* The bytes of glob before its first special character. */
static size_t literal_prefix(const char *glob) {
    return strcspn(glob, "*?[\\");
}

/* For a glob "<literal>*", the literal's length, else ACCESS_NO_PREFIX. */
static size_t star_prefix(const char *glob) {
    size_t len = strlen(glob), lit = literal_prefix(glob);
    return len > 0 && lit == len - 1 && glob[len - 1] == '*' ? lit : ACCESS_NO_PREFIX;
}

void access_rules_free(access_rules_t *r) {
    if (r == NULL) return;
    for (size_t i = 0; i < r->count; i++) rule_free(&r->rules[i]);
    free(r->rules);
    free(r);
}

/* Strict decimal id, 0..ACCESS_ID_MAX. */
static int parse_id(const char *s, uint32_t *out) {
    uint64_t n = 0;
    if (*s == '\0') return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        n = n * 10 + (uint64_t)(*s - '0');
        if (n > ACCESS_ID_MAX) return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

int access_glob_check(const char *glob, char *err, size_t errlen) {
    size_t len = strlen(glob);
    if (len == 0 || len > ACCESS_GLOB_MAX) {
        seterr(err, errlen, "glob '%.40s%s' must be 1 to %d bytes", glob, len > 40 ? "..." : "",
               ACCESS_GLOB_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)glob[i];
        if (ch < 0x21 || ch > 0x7e) {
            seterr(err, errlen, "glob '%.40s' has byte 0x%02X: lock names are 0x21-0x7E", glob,
                   ch);
            return -1;
        }
        if (ch == '\\') {
            if (i + 1 == len) {
                seterr(err, errlen, "glob '%.40s' ends in a lone '\\'", glob);
                return -1;
            }
            i++;
        } else if (ch == '[') {
            /* fnmatch: "[!" or "[^" negates; a ']' right after opens counts
             * as a member. Unclosed, fnmatch takes '[' literally: refused
             * here, as it is most likely a mistake. */
            size_t j = i + 1;
            if (j < len && (glob[j] == '!' || glob[j] == '^')) j++;
            if (j < len && glob[j] == ']') j++;
            while (j < len && glob[j] != ']') j++;
            if (j >= len) {
                seterr(err, errlen, "glob '%.40s' has an unclosed '['", glob);
                return -1;
            }
            i = j;
        }
    }
    return 0;
}

static int add_rule(access_rules_t *r, const access_rule_t *rule) {
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        access_rule_t *n = realloc(r->rules, cap * sizeof(*n));
        if (n == NULL) return -1;
        r->rules = n;
        r->cap = cap;
    }
    r->rules[r->count++] = *rule;
    return 0;
}

/* The principal: "*", "uid:<name or number>", "gid:<name or number>". */
static int parse_principal(access_rule_t *rule, const char *p, char *err, size_t errlen) {
    size_t pl = strlen(p);
    if (pl >= ACCESS_PRINCIPAL_MAX) {
        seterr(err, errlen, "principal '%.40s...' is too long", p);
        return -1;
    }
    memcpy(rule->principal, p, pl + 1);
    rule->known = 1;
    if (strcmp(p, "*") == 0) {
        rule->who = ACCESS_WHO_ANY;
        return 0;
    }
    int uid = strncmp(p, "uid:", 4) == 0, gid = strncmp(p, "gid:", 4) == 0;
    if ((!uid && !gid) || p[4] == '\0') {
        seterr(err, errlen, "principal '%s': expected uid:<user>, gid:<group> or *", p);
        return -1;
    }
    const char *who = p + 4;
    rule->who = uid ? ACCESS_WHO_UID : ACCESS_WHO_GID;
    if (who[0] >= '0' && who[0] <= '9') {
        if (parse_id(who, &rule->id) != 0) {
            seterr(err, errlen, "principal '%s': '%s' is not a number from 0 to %u", p, who,
                   ACCESS_ID_MAX);
            return -1;
        }
        return 0;
    }
    if (uid) {
        struct passwd *pw = getpwnam(who);
        if (pw != NULL) rule->id = (uint32_t)pw->pw_uid;
        else rule->known = 0;
    } else {
        struct group *g = getgrnam(who);
        if (g != NULL) rule->id = (uint32_t)g->gr_gid;
        else rule->known = 0;
    }
    return 0;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    return s;
}

int access_rules_add(access_rules_t *r, const char *key, const char *value, int line,
                     char *err, size_t errlen) {
    char principal[ACCESS_PRINCIPAL_MAX + 8];
    const char *rest = value;

    if (r->file_rules >= ACCESS_RULES_MAX) {
        seterr(err, errlen, "more than %d [access] rules", ACCESS_RULES_MAX);
        return -1;
    }
    /* inih split "uid:billing = lock x" at the ':': "uid", "billing = lock x". */
    if (strcmp(key, "uid") == 0 || strcmp(key, "gid") == 0) {
        const char *eq = strchr(value, '=');
        if (eq == NULL) {
            seterr(err, errlen, "expected %s:<name> = <right> <glob> ...", key);
            return -1;
        }
        size_t n = (size_t)(eq - value);
        if (n >= ACCESS_PRINCIPAL_MAX) {
            seterr(err, errlen, "principal '%s:%.30s...' is too long", key, value);
            return -1;
        }
        char who[ACCESS_PRINCIPAL_MAX];
        memcpy(who, value, n);
        who[n] = '\0';
        snprintf(principal, sizeof(principal), "%s:%s", key, trim(who));
        rest = eq + 1;
    } else {
        if (strlen(key) >= ACCESS_PRINCIPAL_MAX) {
            seterr(err, errlen, "principal '%.40s...' is too long", key);
            return -1;
        }
        snprintf(principal, sizeof(principal), "%s", key);
    }

    access_rule_t rule = {.from = ACCESS_FROM_FILE, .line = line};
    if (parse_principal(&rule, principal, err, errlen) != 0) return -1;

    /* The right, then one glob or more, separated by spaces or tabs. */
    const char *p = rest + strspn(rest, " \t");
    size_t wl = strcspn(p, " \t");
    if (wl == 0) {
        seterr(err, errlen, "%s: expected a right (read, lock or admin) and globs", principal);
        return -1;
    }
    rule.right = ACCESS_NONE;
    for (int i = ACCESS_READ; i <= ACCESS_ADMIN; i++)
        if (strlen(right_names[i]) == wl && strncmp(p, right_names[i], wl) == 0)
            rule.right = (access_right_t)i;
    if (rule.right == ACCESS_NONE) {
        seterr(err, errlen, "%s: '%.*s' is not a right (read, lock or admin)", principal,
               (int)(wl > 40 ? 40 : wl), p);
        return -1;
    }
    p += wl;
    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0') break;
        size_t gl = strcspn(p, " \t");
        char glob[ACCESS_GLOB_MAX + 2];
        if (gl > ACCESS_GLOB_MAX) {
            seterr(err, errlen, "%s: a glob is longer than %d bytes", principal,
                   ACCESS_GLOB_MAX);
            goto fail;
        }
        memcpy(glob, p, gl);
        glob[gl] = '\0';
        p += gl;
        char why[ACCESS_ERR_LEN];
        if (access_glob_check(glob, why, sizeof(why)) != 0) {
            seterr(err, errlen, "%s: %s", principal, why);
            goto fail;
        }
        if (rule.nglobs == ACCESS_GLOBS_MAX) {
            seterr(err, errlen, "%s: more than %d globs in one rule", principal,
                   ACCESS_GLOBS_MAX);
            goto fail;
        }
        if (rule.nglobs == 0 &&
            ((rule.globs = calloc(ACCESS_GLOBS_MAX, sizeof(char *))) == NULL ||
             (rule.prefix = calloc(ACCESS_GLOBS_MAX, sizeof(size_t))) == NULL))
            goto nomem;
        if ((rule.globs[rule.nglobs] = strdup(glob)) == NULL) goto nomem;
        rule.prefix[rule.nglobs] = star_prefix(glob);
        rule.nglobs++;
        if (strcmp(glob, "*") == 0) rule.any_name = 1;
    }
    if (rule.nglobs == 0) {
        seterr(err, errlen, "%s: expected at least one glob after '%s'", principal,
               right_names[rule.right]);
        return -1;
    }
    if (add_rule(r, &rule) != 0) goto nomem;
    r->file_rules++;
    return 0;
nomem:
    seterr(err, errlen, "out of memory");
fail:
    rule_free(&rule);
    return -1;
}

/* A built-in rule: principal, right on every name. */
static int add_builtin(access_rules_t *r, access_who_t who, uint32_t id, access_right_t right,
                       access_from_t from, const char *principal) {
    access_rule_t rule = {.who = who, .id = id, .known = 1, .right = right, .from = from,
                          .any_name = 1, .nglobs = 1};
    snprintf(rule.principal, sizeof(rule.principal), "%s", principal);
    rule.globs = calloc(1, sizeof(char *));
    rule.prefix = calloc(1, sizeof(size_t));
    if (rule.globs == NULL || rule.prefix == NULL || (rule.globs[0] = strdup("*")) == NULL ||
        add_rule(r, &rule) != 0) {
        rule_free(&rule);
        return -1;
    }
    return 0;
}

int access_rules_finish(access_rules_t *r, const uid_t *admin_uids, size_t nadmin) {
    char p[ACCESS_PRINCIPAL_MAX];
    if (r->finished) return 0;
    r->finished = 1;
    if (r->file_rules == 0 &&
        add_builtin(r, ACCESS_WHO_ANY, 0, ACCESS_LOCK, ACCESS_FROM_DEFAULT, "*") != 0)
        return -1;
    if (add_builtin(r, ACCESS_WHO_UID, 0, ACCESS_ADMIN, ACCESS_FROM_ROOT, "uid:0") != 0)
        return -1;
    for (size_t i = 0; i < nadmin; i++) {
        if (admin_uids[i] == 0) continue;
        snprintf(p, sizeof(p), "uid:%u", (unsigned)admin_uids[i]);
        if (add_builtin(r, ACCESS_WHO_UID, (uint32_t)admin_uids[i], ACCESS_ADMIN,
                        ACCESS_FROM_ADMIN_UIDS, p) != 0)
            return -1;
    }
    return 0;
}

/* ---- checks --------------------------------------------------------------------- */

/* 1 if every name glob b matches, glob a matches too: a is "*", or the
 * same text, or "<literal>*" whose literal starts b's literal prefix. */
static int glob_covers(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    size_t al = strlen(a), lit = literal_prefix(a);
    if (al == 0 || lit != al - 1 || a[al - 1] != '*') return 0;
    return literal_prefix(b) >= lit && strncmp(a, b, lit) == 0;
}

/* 1 if rule o's principal covers rule r's: the same one, or "*". */
static int principal_covers(const access_rule_t *o, const access_rule_t *r) {
    if (o->who == ACCESS_WHO_ANY) return 1;
    return o->who == r->who && o->known && r->known && o->id == r->id;
}

static const char *from_text(const access_rule_t *rule, char *buf, size_t cap) {
    switch (rule->from) {
    case ACCESS_FROM_FILE: snprintf(buf, cap, "line %d", rule->line); break;
    case ACCESS_FROM_DEFAULT: snprintf(buf, cap, "the default"); break;
    case ACCESS_FROM_ADMIN_UIDS: snprintf(buf, cap, "admin_uids"); break;
    case ACCESS_FROM_ROOT: snprintf(buf, cap, "uid 0 always"); break;
    }
    return buf;
}

size_t access_rules_check(const access_rules_t *r, const char *file,
                          void (*warn)(void *data, const char *msg), void *data) {
    char msg[ACCESS_ERR_LEN + 2 * ACCESS_GLOB_MAX], where[64];
    size_t n = 0;
    for (size_t i = 0; i < r->count; i++) {
        const access_rule_t *a = &r->rules[i];
        if (a->from != ACCESS_FROM_FILE) continue;
        if (!a->known) {
            snprintf(msg, sizeof(msg), "%s:%d: %s: no such %s: the rule applies to no one", file,
                     a->line, a->principal, a->who == ACCESS_WHO_UID ? "user" : "group");
            warn(data, msg);
            n++;
            continue;
        }
        for (size_t g = 0; g < a->nglobs; g++) {
            const char *glob = a->globs[g];
            int said = 0;
            for (size_t j = 0; j < r->count && !said; j++) {
                const access_rule_t *o = &r->rules[j];
                if (!principal_covers(o, a)) continue;
                for (size_t h = 0; h < o->nglobs && !said; h++) {
                    if (j == i && h == g) continue;
                    /* The same glob twice in one rule, or covered by one of
                     * at least the same right elsewhere (the first of two
                     * equal ones is kept). */
                    int same = strcmp(o->globs[h], glob) == 0;
                    if (!glob_covers(o->globs[h], glob)) continue;
                    int earlier = j < i || (j == i && h < g);
                    if (o->right < a->right ||
                        (same && o->right == a->right && !earlier && o->who == a->who))
                        continue; /* of two equal ones, the second is said */
                    if (same)
                        snprintf(msg, sizeof(msg),
                                 "%s:%d: %s = %s %s overlaps %s (%s = %s %s): rights add up, "
                                 "so it adds nothing",
                                 file, a->line, a->principal, right_names[a->right], glob,
                                 from_text(o, where, sizeof(where)), o->principal,
                                 right_names[o->right], o->globs[h]);
                    else
                        snprintf(msg, sizeof(msg),
                                 "%s:%d: %s = %s %s is unreachable: %s (%s = %s %s) already "
                                 "grants %s there",
                                 file, a->line, a->principal, right_names[a->right], glob,
                                 from_text(o, where, sizeof(where)), o->principal,
                                 right_names[o->right], o->globs[h], right_names[o->right]);
                    said = 1;
                }
            }
            if (said) {
                warn(data, msg);
                n++;
            }
        }
    }
    return n;
}

/* ---- matching ------------------------------------------------------------------- */

int access_rule_applies(const access_rule_t *rule, const access_peer_t *peer) {
    switch (rule->who) {
    case ACCESS_WHO_ANY: return 1;
    case ACCESS_WHO_UID: return rule->known && (uid_t)rule->id == peer->uid;
    case ACCESS_WHO_GID:
        if (!rule->known) return 0;
        for (size_t i = 0; i < peer->ngids; i++)
            if (peer->gids[i] == (gid_t)rule->id) return 1;
        return 0;
    }
    return 0;
}

static int rule_matches(const access_rule_t *rule, const char *name) {
    if (rule->any_name) return 1;
    for (size_t g = 0; g < rule->nglobs; g++) {
        size_t p = rule->prefix[g];
        if (p != ACCESS_NO_PREFIX ? strncmp(rule->globs[g], name, p) == 0
                                  : fnmatch(rule->globs[g], name, 0) == 0)
            return 1;
    }
    return 0;
}

/* Makes view hold the rules of r that apply to peer, best first. */
static int view_make(const access_rules_t *r, access_view_t *view, const access_peer_t *peer) {
    view->generation = 0;
    view->n = 0;
    view->last_len = 0;
    view->best = ACCESS_NONE;
    for (size_t i = 0; i < r->count; i++) {
        if (!access_rule_applies(&r->rules[i], peer)) continue;
        if (view->n == view->cap) {
            size_t cap = view->cap ? view->cap * 2 : 8;
            uint32_t *n = realloc(view->idx, cap * sizeof(*n));
            if (n == NULL) return -1;
            view->idx = n;
            view->cap = cap;
        }
        view->idx[view->n++] = (uint32_t)i;
        if (r->rules[i].right > view->best) view->best = r->rules[i].right;
    }
    /* Highest right first: the first match of the highest right ends the
     * search. A stable insertion sort keeps the file's order within one. */
    for (size_t i = 1; i < view->n; i++) {
        uint32_t x = view->idx[i];
        size_t j = i;
        while (j > 0 && r->rules[view->idx[j - 1]].right < r->rules[x].right) {
            view->idx[j] = view->idx[j - 1];
            j--;
        }
        view->idx[j] = x;
    }
    view->generation = r->generation;
    return 0;
}

void access_view_free(access_view_t *view) {
    free(view->idx);
    view->idx = NULL;
    view->n = view->cap = 0;
    view->generation = 0;
}

/* Without a view: every rule, in order. */
static access_right_t decide_all(const access_rules_t *r, const access_peer_t *peer,
                                 const char *name, int *rule) {
    access_right_t best = ACCESS_NONE;
    *rule = -1;
    for (size_t i = 0; i < r->count; i++) {
        const access_rule_t *x = &r->rules[i];
        if (x->right <= best || !access_rule_applies(x, peer) || !rule_matches(x, name))
            continue;
        best = x->right;
        *rule = (int)i;
    }
    return best;
}

access_right_t access_decide(const access_rules_t *r, access_view_t *view,
                             const access_peer_t *peer, const char *name, size_t len,
                             int *rule) {
    char buf[ACCESS_GLOB_MAX + 1];
    if (len > ACCESS_GLOB_MAX) len = ACCESS_GLOB_MAX;
    memcpy(buf, name, len);
    buf[len] = '\0';
    if (view != NULL && view->generation != r->generation && view_make(r, view, peer) != 0)
        view = NULL;
    if (view == NULL) return decide_all(r, peer, buf, rule);
    if (view->last_len == len && memcmp(view->last, buf, len) == 0) {
        *rule = view->last_rule;
        return view->last_right;
    }
    access_right_t best = ACCESS_NONE;
    *rule = -1;
    for (size_t i = 0; i < view->n; i++) {
        const access_rule_t *x = &r->rules[view->idx[i]];
        if (x->right <= best) break; /* sorted: nothing after it grants more */
        if (!rule_matches(x, buf)) continue;
        best = x->right;
        *rule = (int)view->idx[i];
    }
    memcpy(view->last, buf, len);
    view->last_len = len;
    view->last_right = best;
    view->last_rule = *rule;
    return best;
}

access_right_t access_best(const access_rules_t *r, access_view_t *view,
                           const access_peer_t *peer, int *rule) {
    access_right_t best = ACCESS_NONE;
    *rule = -1;
    for (size_t i = 0; i < r->count; i++) {
        if (r->rules[i].right > best && access_rule_applies(&r->rules[i], peer)) {
            best = r->rules[i].right;
            *rule = (int)i;
        }
    }
    (void)view;
    return best;
}

void access_explain(const access_rules_t *r, int rule, const access_peer_t *peer,
                    access_right_t need, const char *name, size_t len, char *out,
                    size_t cap) {
    char where[64];
    char what[ACCESS_GLOB_MAX + 16];
    if (name != NULL) snprintf(what, sizeof(what), "on %.*s", (int)len, name);
    else snprintf(what, sizeof(what), "on any name");
    if (rule < 0 || (size_t)rule >= r->count) {
        snprintf(out, cap, "no rule grants uid %u %s %s", (unsigned)peer->uid,
                 right_names[need], what);
        return;
    }
    const access_rule_t *x = &r->rules[rule];
    snprintf(out, cap, "rule %s = %s (%s) grants uid %u only %s %s, not %s", x->principal,
             right_names[x->right], from_text(x, where, sizeof(where)), (unsigned)peer->uid,
             right_names[x->right], what, right_names[need]);
}

/* ---- /proc/<pid>/status --------------------------------------------------------- */

/* The value of the line "key:\t..." in status, or NULL. */
static const char *status_field(const char *status, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = status; p != NULL && *p; ) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':') return p + kl + 1;
        p = strchr(p, '\n');
        if (p != NULL) p++;
    }
    return NULL;
}

/* Reads one decimal number at *p (after blanks); 0, or -1 at a line's end. */
static int next_num(const char **p, uint32_t *out) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (*s < '0' || *s > '9') return -1;
    uint64_t n = 0;
    while (*s >= '0' && *s <= '9') {
        n = n * 10 + (uint64_t)(*s - '0');
        if (n > UINT32_MAX) return -1;
        s++;
    }
    *p = s;
    *out = (uint32_t)n;
    return 0;
}

int access_parse_groups(const char *status, uid_t uid, gid_t *gids, size_t have, size_t max) {
    const char *u = status_field(status, "Uid");
    uint32_t real;
    if (u == NULL || next_num(&u, &real) != 0 || (uid_t)real != uid) return -1;
    const char *g = status_field(status, "Groups");
    if (g == NULL) return 0;
    size_t n = have;
    uint32_t v;
    while (n < max && next_num(&g, &v) == 0) {
        int dup = 0;
        for (size_t i = 0; i < n; i++) dup |= gids[i] == (gid_t)v;
        if (!dup) gids[n++] = (gid_t)v;
    }
    return (int)(n - have);
}
