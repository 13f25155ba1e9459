#!lua flags=no-writes
-- A read-only script (Redis 7 shebang): it may run by EVAL_RO too.
-- how: eval_ro
return redis.call('get', KEYS[1])
