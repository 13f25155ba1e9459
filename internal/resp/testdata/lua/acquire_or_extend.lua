-- setups: mine free forever other
local v = redis.call('get', KEYS[1])
if not v then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
elseif v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
