/* An in-memory Redis for unit tests: the commands the scripts call, and Lua 5.1 to run them.
 * SPDX-License-Identifier: MIT
 *
 * Strings, hashes (fields in insertion order, as a small Redis hash keeps
 * them), lists, sets and sorted sets, with expiries on a clock the test
 * owns (rmodel_clock_cb, in ms: TIME answers it too). Scripts run as
 * Redis 7 runs them: KEYS and ARGV as globals, redis.call raising an
 * error table {err = ...} that redis.pcall returns instead,
 * redis.error_reply and redis.status_reply, Lua values turned into
 * replies by Redis's rules (a number truncated to an integer, false a
 * nil, a table an array up to its first nil). PUBLISH and SPUBLISH go to
 * rmodel_publish_cb, which says how many received the message.
 *
 * Only what the scripts use is here; a command it does not know is an
 * error ("ERR unknown command"), which a script's pcall sees as Redis
 * before 6.2 would answer (HRANDFIELD). Out of memory aborts. */
#ifndef DLOCK_REDIS_MODEL_H
#define DLOCK_REDIS_MODEL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rmodel_s rmodel_t;

/* The clock in ms (expiries, PTTL, TIME). */
typedef uint64_t (*rmodel_clock_cb)(void *data);
/* A PUBLISH or SPUBLISH: the number of receivers it answers. */
typedef long long (*rmodel_publish_cb)(void *data, const char *channel, size_t clen,
                                       const char *msg, size_t mlen);

rmodel_t *rmodel_new(rmodel_clock_cb clock, rmodel_publish_cb publish, void *data);
void rmodel_free(rmodel_t *m);

/* One command (argv[0] its name, any case). The reply is the caller's
 * (freeReplyObject); an error is a REDIS_REPLY_ERROR reply. */
redisReply *rmodel_command(rmodel_t *m, size_t argc, const char *const *argv,
                           const size_t *argvlen);
/* The same with NUL-terminated arguments, NULL after the last. */
redisReply *rmodel_call(rmodel_t *m, const char *cmd, ...);
/* EVAL of script with argv = numkeys, keys..., args... (what follows the
 * script or SHA in EVAL and EVALSHA). A script's text is compiled once,
 * by its address: pass the same pointer for the same script. */
redisReply *rmodel_eval(rmodel_t *m, const char *script, size_t argc, const char *const *argv,
                        const size_t *argvlen);

#endif
