-- unknown: in no table of latch's (internal/latchtest/jepsen's hand-written release)
local v = redis.call('get', KEYS[1]) if v == ARGV[1] then redis.call('unlink', KEYS[1]) return 1 end return 0
