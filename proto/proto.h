/* The dlockd line protocol: a pure, resumable request parser and reply formatter.
 * SPDX-License-Identifier: MIT
 *
 * No I/O happens here. Bytes go in through proto_feed(); a request, "need
 * more" or an error comes out. The normative description is PROTOCOL.md. */
#ifndef DLOCK_PROTO_H
#define DLOCK_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Limits of the protocol itself (max_line is configurable, see conf.h). */
#define PROTO_NAME_MAX      255          /* bytes in a lock name */
#define PROTO_NUM_MAX       2147483647u  /* largest number accepted */
#define PROTO_LINE_MIN      64           /* smallest max_line a parser accepts */
#define PROTO_LINE_DEFAULT  4096         /* default max_line */
#define PROTO_LINE_LIMIT    (1024 * 1024) /* largest max_line a parser accepts */
#define PROTO_VALUE_MAX     255          /* bytes in an ELECT value */
/* Any reply but INFO fits, !LEADER <name> <fence> <value> included. */
#define PROTO_REPLY_MAX     (PROTO_NAME_MAX + PROTO_VALUE_MAX + 128)
#define PROTO_REPLY_MIN     32           /* smallest cap at which a long text is cut */
/* An ERR line is cut to this (its text, Redis's included, is for people). */
#define PROTO_ERROR_MAX     (PROTO_NAME_MAX + 128)
/* Most names in one MLOCK, TRYMLOCK or MUNLOCK. */
#define PROTO_MNAMES_MAX    64
/* "OK" and up to PROTO_MNAMES_MAX numbers of 20 digits: the multi-name
 * replies, the only ones longer than PROTO_REPLY_MAX. */
#define PROTO_REPLY_LIST_MAX (2 + PROTO_MNAMES_MAX * 21 + 2)
/* Characters of a request's tag after its '#' (PROTOCOL.md, "Tagged
 * requests"). */
#define PROTO_TAG_MAX       16
/* LIST: the locks told when no limit is given, and the most a limit may ask. */
#define PROTO_LIST_DEFAULT  100
#define PROTO_LIST_MAX      1000

/* The right a verb needs on its name (conf/access.h's rights, in order;
 * a verb without a name needs it on some name): NONE, READ (it only
 * looks), LOCK (it takes, waits for or renews), ADMIN. A release needs
 * none: it touches only the connection's own holds (ERR NOTHELD
 * otherwise), and a hold kept through a reload that took the right away
 * must still be released. */
typedef enum {
    PROTO_RIGHT_NONE = 0,
    PROTO_RIGHT_READ,
    PROTO_RIGHT_LOCK,
    PROTO_RIGHT_ADMIN
} proto_right_t;

/* What follows a command word, in this order: a name, or <n> and n names
 * (NAMES); a value (ELECT's); then the numbers the shape has, each in its
 * own field of proto_request_t: count, wait_ms, lease_ms. Which of them
 * may be left out (always the last ones) is the row's least and most
 * arguments. TARGET is CANCEL's [#<tag>], PATTERN LIST's [<pattern>
 * [<limit>]]. A new command of a known shape needs no code here. */
#define PROTO_ARG_NAME    0x01u
#define PROTO_ARG_NAMES   0x02u
#define PROTO_ARG_VALUE   0x04u
#define PROTO_ARG_COUNT   0x08u
#define PROTO_ARG_WAIT    0x10u
#define PROTO_ARG_LEASE   0x20u
#define PROTO_ARG_TARGET  0x40u
#define PROTO_ARG_PATTERN 0x80u

/* The shapes PROTO_CMD_MAP's rows name. */
#define PROTO_SHAPE_NONE                  0u
#define PROTO_SHAPE_NAME                  PROTO_ARG_NAME
#define PROTO_SHAPE_NAME_WAIT             (PROTO_ARG_NAME | PROTO_ARG_WAIT)
#define PROTO_SHAPE_NAME_LEASE            (PROTO_ARG_NAME | PROTO_ARG_LEASE)
#define PROTO_SHAPE_NAME_WAIT_LEASE       (PROTO_SHAPE_NAME_LEASE | PROTO_ARG_WAIT)
#define PROTO_SHAPE_NAME_COUNT            (PROTO_ARG_NAME | PROTO_ARG_COUNT)
#define PROTO_SHAPE_NAME_COUNT_LEASE      (PROTO_SHAPE_NAME_COUNT | PROTO_ARG_LEASE)
#define PROTO_SHAPE_NAME_COUNT_WAIT_LEASE (PROTO_SHAPE_NAME_COUNT_LEASE | PROTO_ARG_WAIT)
#define PROTO_SHAPE_NAME_VALUE_LEASE      (PROTO_ARG_NAME | PROTO_ARG_VALUE | PROTO_ARG_LEASE)
#define PROTO_SHAPE_NAMES                 PROTO_ARG_NAMES
#define PROTO_SHAPE_NAMES_LEASE           (PROTO_ARG_NAMES | PROTO_ARG_LEASE)
#define PROTO_SHAPE_NAMES_WAIT_LEASE      (PROTO_SHAPE_NAMES_LEASE | PROTO_ARG_WAIT)
#define PROTO_SHAPE_TARGET                PROTO_ARG_TARGET
#define PROTO_SHAPE_PATTERN               PROTO_ARG_PATTERN

/* Every command word: id, word, least and most arguments, their shape
 * (PROTO_SHAPE_*), the right it needs (PROTO_RIGHT_*), usage. */
#define PROTO_CMD_MAP(XX)                                                    \
    XX(PING, "PING", 0, 0, NONE, NONE, "PING")                               \
    XX(LOCK, "LOCK", 1, 2, NAME_LEASE, LOCK, "LOCK <name> [<lease_ms>]")     \
    XX(TRYLOCK, "TRYLOCK", 1, 3, NAME_WAIT_LEASE, LOCK,                      \
       "TRYLOCK <name> [<wait_ms> [<lease_ms>]]")                            \
    XX(UNLOCK, "UNLOCK", 1, 1, NAME, NONE, "UNLOCK <name>")                  \
    XX(RENEW, "RENEW", 1, 2, NAME_LEASE, LOCK, "RENEW <name> [<lease_ms>]")  \
    XX(STATUS, "STATUS", 1, 1, NAME, READ, "STATUS <name>")                  \
    XX(WHO, "WHO", 1, 1, NAME, READ, "WHO <name>")                           \
    XX(FORCEUNLOCK, "FORCEUNLOCK", 1, 1, NAME, ADMIN, "FORCEUNLOCK <name>")  \
    XX(RLOCK, "RLOCK", 1, 2, NAME_LEASE, LOCK, "RLOCK <name> [<lease_ms>]")  \
    XX(WLOCK, "WLOCK", 1, 2, NAME_LEASE, LOCK, "WLOCK <name> [<lease_ms>]")  \
    XX(TRYRLOCK, "TRYRLOCK", 1, 3, NAME_WAIT_LEASE, LOCK,                    \
       "TRYRLOCK <name> [<wait_ms> [<lease_ms>]]")                           \
    XX(TRYWLOCK, "TRYWLOCK", 1, 3, NAME_WAIT_LEASE, LOCK,                    \
       "TRYWLOCK <name> [<wait_ms> [<lease_ms>]]")                           \
    XX(RUNLOCK, "RUNLOCK", 1, 1, NAME, NONE, "RUNLOCK <name>")               \
    XX(WUNLOCK, "WUNLOCK", 1, 1, NAME, NONE, "WUNLOCK <name>")               \
    XX(SEMINIT, "SEMINIT", 2, 2, NAME_COUNT, LOCK, "SEMINIT <name> <permits>") \
    XX(ACQUIRE, "ACQUIRE", 2, 3, NAME_COUNT_LEASE, LOCK,                     \
       "ACQUIRE <name> <permits> [<lease_ms>]")                              \
    XX(TRYACQUIRE, "TRYACQUIRE", 2, 4, NAME_COUNT_WAIT_LEASE, LOCK,          \
       "TRYACQUIRE <name> <permits> [<wait_ms> [<lease_ms>]]")               \
    XX(RELEASE, "RELEASE", 2, 2, NAME_COUNT, NONE, "RELEASE <name> <permits>") \
    XX(FAIRLOCK, "FAIRLOCK", 1, 2, NAME_LEASE, LOCK, "FAIRLOCK <name> [<lease_ms>]") \
    XX(TRYFAIRLOCK, "TRYFAIRLOCK", 1, 3, NAME_WAIT_LEASE, LOCK,              \
       "TRYFAIRLOCK <name> [<wait_ms> [<lease_ms>]]")                        \
    XX(ELECT, "ELECT", 2, 3, NAME_VALUE_LEASE, LOCK,                         \
       "ELECT <name> <value> [<lease_ms>]")                                  \
    XX(RESIGN, "RESIGN", 1, 1, NAME, NONE, "RESIGN <name>")                  \
    XX(LEADER, "LEADER", 1, 1, NAME, READ, "LEADER <name>")                  \
    XX(OBSERVE, "OBSERVE", 1, 1, NAME, READ, "OBSERVE <name>")               \
    XX(UNOBSERVE, "UNOBSERVE", 1, 1, NAME, NONE, "UNOBSERVE <name>")         \
    XX(MLOCK, "MLOCK", 2, PROTO_MNAMES_MAX + 2, NAMES_LEASE, LOCK,           \
       "MLOCK <n> <name1> ... <name_n> [<lease_ms>]")                       \
    XX(TRYMLOCK, "TRYMLOCK", 2, PROTO_MNAMES_MAX + 3, NAMES_WAIT_LEASE, LOCK, \
       "TRYMLOCK <n> <name1> ... <name_n> [<wait_ms> [<lease_ms>]]")        \
    XX(MUNLOCK, "MUNLOCK", 2, PROTO_MNAMES_MAX + 1, NAMES, NONE,             \
       "MUNLOCK <n> <name1> ... <name_n>")                                  \
    XX(LATCHSET, "LATCHSET", 2, 2, NAME_COUNT, LOCK, "LATCHSET <name> <count>") \
    XX(COUNTDOWN, "COUNTDOWN", 1, 1, NAME, LOCK, "COUNTDOWN <name>")         \
    XX(AWAIT, "AWAIT", 1, 1, NAME, READ, "AWAIT <name>")                     \
    XX(TRYAWAIT, "TRYAWAIT", 1, 2, NAME_WAIT, READ, "TRYAWAIT <name> [<wait_ms>]") \
    XX(LATCHCOUNT, "LATCHCOUNT", 1, 1, NAME, READ, "LATCHCOUNT <name>")      \
    XX(CANCEL, "CANCEL", 0, 1, TARGET, NONE, "CANCEL [#<tag>]")              \
    XX(INFO, "INFO", 0, 0, NONE, NONE, "INFO")                               \
    XX(CLIENTS, "CLIENTS", 0, 0, NONE, ADMIN, "CLIENTS")                     \
    XX(LIST, "LIST", 0, 2, PATTERN, READ, "LIST [<pattern> [<limit>]]")      \
    XX(QUIT, "QUIT", 0, 0, NONE, NONE, "QUIT")

typedef enum {
    PROTO_CMD_NONE = 0,
#define XX(id, word, min, max, shape, right, usage) PROTO_CMD_##id,
    PROTO_CMD_MAP(XX)
#undef XX
    PROTO_CMD_COUNT
} proto_cmd_t;

/* Every error code: enum, wire name and default text come from one table. */
#define PROTO_ERR_MAP(XX)                                                    \
    XX(UNKNOWN, "no such command")                                           \
    XX(ARGS, "wrong number of arguments or bad number")                      \
    XX(NAME, "lock names are 1-255 bytes of 0x21-0x7E")                      \
    XX(TOOLONG, "line too long")                                             \
    XX(NOTHELD, "this connection does not hold that lock")                   \
    XX(BACKEND, "redis unavailable")                                         \
    XX(LIMIT, "limit reached")                                               \
    XX(DENIED, "not allowed for this peer")                                  \
    XX(KIND, "the name is another kind of lock")                             \
    XX(CANCELLED, "the wait was cancelled")

typedef enum {
    PROTO_ERR_NONE = 0,
#define XX(id, text) PROTO_ERR_##id,
    PROTO_ERR_MAP(XX)
#undef XX
    PROTO_ERR_COUNT
} proto_err_t;

/* A parsed request. The name is copied, so the request outlives the bytes.
 * MLOCK, TRYMLOCK and MUNLOCK carry nnames names (name is the first): they
 * are copied into mnames, allocated for those requests only and freed by
 * proto_request_free(); proto_mname() gives the i-th. */
typedef struct proto_request_s {
    proto_cmd_t cmd;                  /* PROTO_CMD_NONE on UNKNOWN */
    proto_err_t err;                  /* PROTO_ERR_NONE unless proto_feed said error */
    char name[PROTO_NAME_MAX + 1];    /* NUL-terminated lock name */
    size_t name_len;
    uint32_t wait_ms;                 /* a shape's WAIT (the TRY commands); 0 when absent */
    uint32_t lease_ms;                /* a shape's LEASE (the locking commands, RENEW);
                                         0 when absent */
    uint32_t count;                   /* a shape's COUNT: SEMINIT's, ACQUIRE's,
                                         TRYACQUIRE's, RELEASE's permits */
    char value[PROTO_VALUE_MAX + 1];  /* ELECT: NUL-terminated, as a name is;
                                         CANCEL #<tag>: the tag, without '#' */
    size_t value_len;
    const char *detail;               /* static text explaining err, or NULL */
    unsigned nnames;                  /* MLOCK, TRYMLOCK, MUNLOCK: 1..PROTO_MNAMES_MAX */
    char *mnames;                     /* ... their names, each NUL-terminated, or NULL */
    uint16_t moff[PROTO_MNAMES_MAX];  /* ... where each starts in mnames */
    uint8_t mlen[PROTO_MNAMES_MAX];   /* ... and its length */
    uint32_t limit;                   /* LIST: 1..PROTO_LIST_MAX (its pattern is in
                                         value: it names no one lock) */
    char tag[PROTO_TAG_MAX + 1];      /* the line's tag without its '#', NUL-terminated */
    uint8_t tag_len;                  /* ... 0: untagged (also for a malformed tag) */
} proto_request_t;

/* The i-th name of a multi-name request (i < nnames), NUL-terminated. */
static inline const char *proto_mname(const proto_request_t *r, unsigned i, size_t *len) {
    *len = r->mlen[i];
    return r->mnames + r->moff[i];
}

/* Frees what a request of many names owns (any request: a no-op for the
 * others). Call it once done with a PROTO_REQUEST. */
void proto_request_free(proto_request_t *req);

typedef enum {
    PROTO_NEED_MORE = 0,  /* every byte was used; feed more */
    PROTO_REQUEST,        /* *req holds a request */
    PROTO_ERROR           /* *req->err says what was wrong with one line */
} proto_status_t;

/* A parser carries the unfinished line between feeds. It allocates only
 * while a line is split across feeds, and never more than max_line bytes. */
typedef struct proto_parser_s {
    size_t max_line;  /* bytes allowed before the LF (a final CR counts) */
    char *partial;    /* the unfinished line, or NULL */
    size_t len;       /* bytes in partial */
    size_t cap;       /* bytes allocated for partial */
    int overflow;     /* 1 once TOOLONG was returned: the stream is lost */
} proto_parser_t;

/* Returns 0, or -1 when max_line is outside PROTO_LINE_MIN..PROTO_LINE_LIMIT. */
int proto_parser_init(proto_parser_t *p, size_t max_line);
void proto_parser_free(proto_parser_t *p);

/* Feeds len bytes. Sets *used to how many were consumed. On PROTO_REQUEST
 * or PROTO_ERROR, call again with the rest. After PROTO_ERROR with
 * PROTO_ERR_TOOLONG the stream cannot be resynchronised: close it. Empty
 * lines are skipped silently. A failed allocation is reported as TOOLONG,
 * since the line cannot be held either way. */
proto_status_t proto_feed(proto_parser_t *p, const char *data, size_t len,
                          size_t *used, proto_request_t *req);

/* Parses one complete line (without its LF). Exposed for tests and tools. */
proto_status_t proto_parse_line(const char *line, size_t len,
                                proto_request_t *req);

/* The first request in data (blank lines skipped): 1 if it is cmd, well
 * formed, untagged and without arguments; 0 if it is anything else (another
 * command, cmd tagged or with arguments, a bad line); -1 if no line is
 * whole yet. The session looks for the bare CANCEL behind an untagged wait:
 * "CANCEL #7" and "#8 CANCEL" there are not it. */
int proto_next_is(const char *data, size_t len, proto_cmd_t cmd);
/* Strict decimal: digits only, 0..PROTO_NUM_MAX. Returns 0 or -1. */
int proto_parse_num(const char *s, size_t len, uint32_t *out);

/* Returns 1 if name is a valid lock name. */
int proto_name_valid(const char *name, size_t len);

const char *proto_cmd_name(proto_cmd_t cmd);
/* The command whose word is word (len bytes, any case), or PROTO_CMD_NONE. */
proto_cmd_t proto_cmd_of(const char *word, size_t len);
const char *proto_cmd_usage(proto_cmd_t cmd);
/* The right cmd needs (PROTO_RIGHT_NONE for PROTO_CMD_NONE). */
proto_right_t proto_cmd_right(proto_cmd_t cmd);
const char *proto_err_name(proto_err_t err);
const char *proto_err_text(proto_err_t err);

/* Reply formatting. Each writes one line ending in LF into out (at most cap
 * bytes, NUL-terminated) and returns its length without the NUL.
 *
 * A reply is never dropped for being long. The free text (proto_reply_ok's
 * formatted text, an error's detail, a !LOST reason) is cut when the line
 * would not fit: it keeps what fits, ends in "..." and the line, LF
 * included, is then cap - 1 bytes. Every byte below 0x20 (LF, CR, tab, ...)
 * and 0x7F in any text is written as '?', so one reply is always one line.
 *
 * -1 only when:
 * - cap < PROTO_REPLY_MIN and the whole line does not fit (nothing is cut
 *   below PROTO_REPLY_MIN; a line that fits is written);
 * - proto_event_lost's name does not fit: a name is never cut. It always
 *   fits when cap >= PROTO_REPLY_MIN + strlen(name), so PROTO_REPLY_MAX
 *   holds any lock name;
 * - vsnprintf fails on proto_reply_ok's format (an encoding error).
 * TIMEOUT has no free text; it fits any cap >= PROTO_REPLY_MIN. */
int proto_reply_ok(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "OK <v>" and "OK <a> <b>" (a grant's fence and holds), without a
 * format: the lock requests' replies. -1 when cap is below the longest
 * such line (46 bytes with the NUL), whatever the numbers. */
int proto_reply_ok_num(char *out, size_t cap, long long v);
int proto_reply_ok_num2(char *out, size_t cap, unsigned long long a, long long b);
/* "OK <v1> ... <vn>": the multi-name replies (fences, holds left). -1
 * when it does not fit (PROTO_REPLY_LIST_MAX holds any). */
int proto_reply_ok_list(char *out, size_t cap, const uint64_t *v, size_t n);
int proto_reply_timeout(char *out, size_t cap, long long ttl_ms);
/* "#<tag> ", the head of a tagged request's reply, written before its line
 * (the tag as proto_request_t has it, without '#'). No LF; NUL-terminated
 * as the others. Returns its length (tag_len + 2), or -1 when it does not
 * fit in cap with its NUL, or when tag is not 1 to PROTO_TAG_MAX of
 * 0-9 A-Z a-z _ - (a parsed tag always is): nothing is cut. */
int proto_reply_tag(char *out, size_t cap, const char *tag, size_t tag_len);
int proto_reply_error(char *out, size_t cap, proto_err_t err,
                      const char *detail);
int proto_event_lost(char *out, size_t cap, const char *name,
                     const char *reason);
/* LEADER's and OBSERVE's answer: "OK <fence> <value>", or "OK NONE" when
 * fence is 0; and the event "!LEADER <name> <fence> <value>" or
 * "!LEADER <name> NONE". Names and values are never cut: -1 when the line
 * does not fit (PROTO_REPLY_MAX holds any). */
int proto_reply_leader(char *out, size_t cap, uint64_t fence, const char *value,
                       size_t value_len);
int proto_event_leader(char *out, size_t cap, const char *name, size_t name_len,
                       uint64_t fence, const char *value, size_t value_len);

#endif
