-- A runtime error on line 6, after a write: the write stays (no rollback).
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('pexpire', KEYS[1], 250000)
end
local t = v.missing
return 1
