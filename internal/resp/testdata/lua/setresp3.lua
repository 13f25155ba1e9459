redis.setresp(3)
local v = redis.call('get', KEYS[1])
if v == nil then return 'nil' end
return {v, redis.call('exists', KEYS[1]), redis.call('type', KEYS[1])}
