local old = redis.call('getset', KEYS[1], ARGV[1])
if old == false then return 'acquired' end
return {old, redis.call('pttl', KEYS[1])}
