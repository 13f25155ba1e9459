#!lua flags=no-writes
-- A read-only script that writes: refused.
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
