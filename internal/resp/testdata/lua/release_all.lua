-- keys: 3
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[1] then
    n = n + redis.call('del', key)
  end
end
return n
