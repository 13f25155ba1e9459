local v = redis.pcall('get', KEYS[1])
if type(v) == 'table' and v.err then return v end
if v == ARGV[1] then return redis.pcall('del', KEYS[1]) end
return 0
