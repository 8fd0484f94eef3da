/* Redisson's RLock scripts, verbatim, for the tests that run them against
 * dlockd's locks: RedissonLock.tryLockInnerAsync (KEYS[1] the lock, ARGV[1]
 * lease ms, ARGV[2] the holder's field; nil when granted, else the pttl)
 * and unlockInnerAsync (KEYS[1] the lock, KEYS[2] its channel, ARGV[1] the
 * unlock message, ARGV[2] lease ms, ARGV[3] the field).
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TESTS_REDISSON_H
#define DLOCK_TESTS_REDISSON_H

static const char redisson_lock[] =
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);";

static const char redisson_unlock[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; "
    "end; "
    "return nil;";

#endif
