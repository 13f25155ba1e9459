-- unknown: in no table of latch's (internal/latchtest/jepsen's hand-written renewal)
local v = redis.call('get', KEYS[1]) if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0
